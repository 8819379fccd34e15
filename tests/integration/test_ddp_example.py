"""examples/ddp_allreduce.py under dlaunch: real PyTorch DDP over gloo, the job users start with."""

from conftest import Background, describe, free_port, run_dlaunch, source_dir, write_script


def example():
    path = source_dir() / "examples" / "ddp_allreduce.py"
    assert path.is_file(), path
    return path


def test_ddp_allreduce_4_ranks(torch_python):
    proc = run_dlaunch(["--nproc-per-node", 4, example()], timeout=120)
    assert proc.returncode == 0, describe(proc)
    # Only rank 0 prints, once; the sum of (rank + 1) over 4 ranks is 10.
    assert proc.stdout == "[0]:OK world=4 sum=10.0\n", describe(proc)


def test_ddp_allreduce_standalone_2_ranks(torch_python):
    proc = run_dlaunch(["--standalone", "--nproc_per_node", 2, example()], timeout=120)
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout == "[0]:OK world=2 sum=3.0\n", describe(proc)


def test_ddp_after_a_restart_reuses_the_master_port(tmp_path, torch_python):
    # Attempt 0 forms a process group, then rank 1 dies; attempt 1 must form a new group on the same
    # MASTER_PORT (the first rank 0's store is gone) and run the example to the end.
    script = write_script(tmp_path, "crash_once_then_example.py", f"""
        import os, runpy
        import torch.distributed as dist
        if os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
            dist.init_process_group("gloo")
            dist.barrier()
            if dist.get_rank() == 1:
                os._exit(1)
            dist.barrier()  # never completes: rank 0 is stopped by dlaunch
        runpy.run_path({str(example())!r}, run_name="__main__")
    """)
    proc = run_dlaunch(["--nproc-per-node", 2, "--max-restarts", 1, "--grace", 5, "--log-dir", tmp_path / "logs",
                        script], timeout=120)
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout.splitlines()[-1] == "[0]:OK world=2 sum=3.0", describe(proc)
    assert "restart 1 of 1" in proc.stderr


def test_ddp_two_static_nodes_on_one_host_with_different_worker_counts(tmp_path, torch_python):
    # Two dlaunch agents, node ranks 0 and 1 of a static 2-node job, node 0 with 1 worker and node 1 with 2:
    # one world of 3, as under torchrun. The agents meet on MASTER_PORT first, then rank 0's store takes it.
    port = free_port()
    common = ["--nnodes", 2, "--master-addr", "127.0.0.1", "--master-port", port]
    node1_dir = tmp_path / "node1"
    node1_dir.mkdir()
    with Background([*common, "--node-rank", 1, "--nproc-per-node", 2, "--log-dir", tmp_path / "logs1", example()],
                    node1_dir) as node1:
        node0 = run_dlaunch([*common, "--node-rank", 0, "--nproc-per-node", 1, "--log-dir", tmp_path / "logs0",
                             example()], timeout=120)
        code1 = node1.wait(timeout=60)
        assert node0.returncode == 0, describe(node0)
        assert code1 == 0, node1.stderr()
    assert node0.stdout == "[0:0]:OK world=3 sum=6.0\n", describe(node0)
    assert node1.stdout() == ""
    # Node 1's ranks are 1 and 2: their log files are under local ranks 0 and 1 of node 1's run.
    assert sorted(p.parent.name for p in (tmp_path / "logs1").glob("*/attempt_0/*/stdout.log")) == ["0", "1"]
