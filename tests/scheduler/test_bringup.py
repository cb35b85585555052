"""deploy/local/slurm/up.sh against the running cluster: a rerun changes nothing, and a second cluster on the same
ports is refused with a message instead of fighting over them."""

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UP = ROOT / "deploy" / "local" / "slurm" / "up.sh"

pytestmark = pytest.mark.slurm


def up(env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(UP)], env={**os.environ, **env}, capture_output=True, text=True, timeout=120)


def test_a_rerun_keeps_everything_running(slurm_conf):
    kb_home = Path(slurm_conf).parents[2]  # $KB_HOME/slurm/etc/slurm.conf
    if not (kb_home / "slurm" / "db-name").exists():
        pytest.skip(f"{slurm_conf} was not made by deploy/local/slurm/up.sh")
    done = up({"KB_HOME": str(kb_home)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == f"export SLURM_CONF={slurm_conf}"
    for daemon in (
        "slurmdbd",
        "slurmctld",
        *(f"slurmd of {node}" for node in ("jobs", "runner1", "runner2", "runner3")),
    ):
        assert f"{daemon} already running" in done.stderr
    assert "restarting" not in done.stderr and "nodes jobs runner1 runner2 runner3 ready" in done.stderr


def test_another_cluster_on_the_same_ports_is_refused(slurm_conf, tmp_path):
    if os.environ.get("KB_SLURM_PORT_BASE", "6817") != "6817":
        pytest.skip("the running cluster is not on the default ports")
    done = up({"KB_HOME": str(tmp_path), "KB_SLURM_NO_INSTALL": "1"})
    assert done.returncode == 1
    assert "is taken by another Slurm not started from" in done.stderr and "KB_SLURM_PORT_BASE" in done.stderr
    assert not (tmp_path / "slurm" / "run" / "started").exists()  # nothing was started
