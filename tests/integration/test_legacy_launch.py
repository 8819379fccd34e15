"""torch.distributed.launch's legacy contract: --local-rank=N (or --local_rank=N) before the script's
arguments, through --local-rank-arg and the dlaunch-launch alias (which passes the spelling the installed
torch.distributed.launch passes); --use-env / --use_env turn it off."""
import json
import os
import subprocess

from conftest import USAGE, base_env, describe, dlaunch_bin, run_dlaunch, write_script

# A training script written for torch.distributed.launch: argparse with the local rank argument.
SCRIPT = """
import argparse, json, os, sys
parser = argparse.ArgumentParser()
parser.add_argument("--local-rank", "--local_rank", dest="local_rank", type=int, default=None)
parser.add_argument("--epochs", type=int, required=True)
args = parser.parse_args()
with open(os.path.join(sys.argv[0] + ".out", os.environ["RANK"]), "w") as f:
    json.dump({"arg": args.local_rank, "env": os.environ["LOCAL_RANK"], "epochs": args.epochs,
               "argv": sys.argv[1:]}, f)
"""


def launch(tmp_path, command, *options, env=None):
    script = write_script(tmp_path, "train.py", SCRIPT)
    out = tmp_path / "train.py.out"
    out.mkdir()
    proc = subprocess.run([command, *options, "--nproc_per_node", "2", str(script), "--epochs", "3"],
                          env=base_env(env), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, describe(proc)
    return {int(p.name): json.loads(p.read_text()) for p in out.iterdir()}


def alias():
    path = os.path.join(os.path.dirname(dlaunch_bin()), "dlaunch-launch")
    assert os.path.islink(path) and os.access(path, os.X_OK), "the build must create dlaunch-launch next to dlaunch"
    return path


def torch_spelling(python):
    """What this torch's torch.distributed.launch passes: --local_rank before torch 2.0, --local-rank since."""
    version = subprocess.run([python, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                             text=True, timeout=120, check=True).stdout
    return "--local-rank" if int(version.split(".")[0]) >= 2 else "--local_rank"


def test_alias_passes_what_the_installed_torch_launch_passes(torch_python, tmp_path):
    spelling = torch_spelling(torch_python)
    ranks = launch(tmp_path, alias())
    assert sorted(ranks) == [0, 1]
    for rank, r in ranks.items():
        assert r["argv"] == [f"{spelling}={rank}", "--epochs", "3"]
        assert r["arg"] == rank and r["env"] == str(rank) and r["epochs"] == 3


def test_alias_without_torch_passes_the_dash_spelling(tmp_path):
    # A Python that cannot import torch (site-packages off): nothing to match, torch >= 2.0's spelling.
    python = tmp_path / "python-without-site"
    python.write_text(f"#!/bin/sh\nexec {os.environ.get('PYTHON_EXEC', '/usr/bin/python3')} -S \"$@\"\n")
    python.chmod(0o755)
    ranks = launch(tmp_path, alias(), env={"PYTHON_EXEC": str(python)})
    assert [r["argv"][0] for _, r in sorted(ranks.items())] == ["--local-rank=0", "--local-rank=1"]


def test_underscore_spelling_for_old_scripts(tmp_path):
    ranks = launch(tmp_path, alias(), "--local-rank-arg", "underscore")
    assert [r["argv"][0] for _, r in sorted(ranks.items())] == ["--local_rank=0", "--local_rank=1"]


def test_use_env_keeps_the_environment_only(tmp_path):
    for spelling in ("--use_env", "--use-env"):
        sub = tmp_path / spelling.strip("-")
        sub.mkdir()
        ranks = launch(sub, alias(), spelling)
        assert all(r["argv"] == ["--epochs", "3"] and r["arg"] is None for r in ranks.values())


def test_dlaunch_default_is_torchrun_contract(tmp_path):
    ranks = launch(tmp_path, dlaunch_bin())
    assert all(r["argv"] == ["--epochs", "3"] for r in ranks.values())
    sub = tmp_path / "switch"
    sub.mkdir()
    ranks = launch(sub, dlaunch_bin(), "--local-rank-arg", "dash")
    assert ranks[1]["argv"] == ["--local-rank=1", "--epochs", "3"]


def test_plan_shows_the_argument_and_help_names_the_alias(torch_python, tmp_path):
    script = write_script(tmp_path, "train.py", SCRIPT)
    proc = subprocess.run([alias(), "plan", "--format", "json", "--nproc_per_node", "2", str(script), "--x"],
                          env=base_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, describe(proc)
    plan = json.loads(proc.stdout)
    assert plan["ranks"][1]["argv"][-2:] == [f"{torch_spelling(torch_python)}=1", "--x"]
    help_text = subprocess.run([alias(), "--help"], capture_output=True, text=True, timeout=60).stdout
    assert "torch.distributed.launch" in help_text and "--use-env" in help_text


def test_bad_spelling_is_a_usage_error(tmp_path):
    proc = run_dlaunch(["--local-rank-arg", "camel", "train.py"])
    assert proc.returncode == USAGE
    assert "--local-rank-arg: 'camel' is not a spelling" in proc.stderr
