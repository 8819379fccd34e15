"""Workers that succeed at different times: dlaunch waits for every one of them."""

import re
import subprocess
import time

from conftest import DEFAULT_TIMEOUT, base_env, describe, dlaunch_bin, run_dlaunch, write_script


def test_dlaunch_waits_for_the_slowest_worker(tmp_path):
    script = write_script(tmp_path, "staggered.py", """
        import os, time
        rank = int(os.environ["RANK"])
        time.sleep(1.5 if rank == 2 else 0.1 * rank)
        print(f"rank {rank} done")
    """)
    t0 = time.monotonic()
    proc = run_dlaunch(["--nproc-per-node", 3, script])
    elapsed = time.monotonic() - t0
    assert proc.returncode == 0, describe(proc)
    assert elapsed >= 1.5, f"dlaunch returned after {elapsed:.2f}s, before the slow rank finished"
    assert sorted(proc.stdout.splitlines()) == ["[0]:rank 0 done", "[1]:rank 1 done", "[2]:rank 2 done"]
    # The slow rank's line is the last one printed.
    assert proc.stdout.splitlines()[-1] == "[2]:rank 2 done"


def test_output_without_final_newline_is_kept(tmp_path):
    script = write_script(tmp_path, "partial.py", """
        import sys
        sys.stdout.write("no newline at the end")
        sys.stderr.write("nor here")
    """)
    proc = run_dlaunch(["--nproc-per-node", 1, script])
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout == "[0]:no newline at the end\n"
    assert "[0]:nor here\n" in proc.stderr


def test_worker_stdin_is_empty(tmp_path):
    # Several workers must not wait on the terminal, nor take each other's input: their stdin is /dev/null.
    script = write_script(tmp_path, "reader.py", """
        import sys
        data = sys.stdin.read()
        print(f"read {len(data)} bytes")
    """)
    proc = run_dlaunch(["--nproc-per-node", 2, script], timeout=20)
    assert proc.returncode == 0, describe(proc)
    assert sorted(proc.stdout.splitlines()) == ["[0]:read 0 bytes", "[1]:read 0 bytes"]


def test_a_single_worker_reads_dlaunchs_stdin(tmp_path):
    """As under torchrun: one worker on the node gets dlaunch's stdin, so that breakpoint() and input() work."""
    script = write_script(tmp_path, "ask.py", """
        answer = input("name? ")
        print(f"hello {answer}")
    """)
    proc = subprocess.run([dlaunch_bin(), "--nproc-per-node", "1", str(script)], input="pdb user\n", text=True,
                          capture_output=True, env=base_env(), timeout=DEFAULT_TIMEOUT)
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout == "[0]:name? hello pdb user\n", describe(proc)


def test_workers_start_in_dlaunchs_working_directory(tmp_path):
    script = write_script(tmp_path, "cwd.py", "import os; print(os.getcwd())\n")
    work = tmp_path / "work"
    work.mkdir()
    proc = run_dlaunch(["--nproc-per-node", 1, script], cwd=work)
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout == f"[0]:{work}\n"


def test_while_the_last_rank_runs_dlaunch_says_who_it_waits_for(tmp_path):
    script = write_script(tmp_path, "slow_last.py", """
        import os, time
        if os.environ["RANK"] == "1":
            time.sleep(15)  # the note is due 10 s after rank 0 ended; the next one 20 s later
    """)
    proc = run_dlaunch(["--nproc-per-node", 2, script])
    assert proc.returncode == 0, describe(proc)
    assert re.search(r"dlaunch: finish: 1 of 2 ranks finished; waiting for rank 1 \(pid \d+, host \S+, running 1\d s\)",
                     proc.stderr), describe(proc)
    assert proc.stderr.count("finish: ") == 1, describe(proc)  # the next note would come 20 s later
