"""Fixtures of the Slurm tests (helpers: slurmtest.py). CTest starts the cluster (tests/slurm/cluster.sh)
and stages the build where every node sees it (DLAUNCH_SLURM_STAGE) before these tests run."""
import os

import pytest

from slurmtest import make_outdir


@pytest.fixture(scope="session")
def stage():
    path = os.environ.get("DLAUNCH_SLURM_STAGE", "")
    assert path and os.path.isdir(path), "DLAUNCH_SLURM_STAGE must name the staged directory (tests/slurm/stage.sh)"
    return path


@pytest.fixture()
def outdir(stage):
    """A fresh directory every node can write to."""
    return make_outdir()
