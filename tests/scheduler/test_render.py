"""The local cluster's slurm.conf is rendered from scienceslack.json's partition limits."""

import importlib.util
import json
from pathlib import Path

import pytest

from contracts.rules import Rules, parse

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("slurm_render", ROOT / "deploy/local/slurm/render.py")
render = importlib.util.module_from_spec(spec)
spec.loader.exec_module(render)

VALUES = {
    "state_dir": "/state",
    "node_cpus": 2,
    "node_mem_mb": 20000,
    "db_host": "127.0.0.1",
    "db_port": "3306",
    "db_user": "u",
    "db_password": "secret",
    "db_name": "acct",
    "ctld_port": 6817,
    "slurmd_port": 6818,
    "dbd_port": 6819,
}


def rules_dict() -> dict:
    return json.loads((ROOT / "scienceslack.json").read_text())


def rules(document: dict | None = None) -> Rules:
    return parse(document or rules_dict())


def test_partition_main_carries_the_rules_limits():
    slurm_conf, slurmdbd_conf = render.render(rules(), VALUES)
    partition = next(line for line in slurm_conf.splitlines() if line.startswith("PartitionName=main"))
    fields = dict(field.split("=", 1) for field in partition.split())
    assert fields["MaxTime"] == "60" and fields["DefaultTime"] == "10"
    assert fields["MaxCPUsPerNode"] == "4" and fields["MaxMemPerNode"] == "8192" and fields["DefMemPerCPU"] == "2048"
    assert "EnforcePartLimits=ALL" in slurm_conf
    assert "NodeName=jobs NodeAddr=127.0.0.1 Port=6818 CPUs=2 RealMemory=20000" in slurm_conf
    assert "Default=YES" in partition and "Nodes=jobs" in partition and "AllowAccounts" not in partition
    assert "StateSaveLocation=/state/ctld" in slurm_conf
    assert "StoragePass=secret" in slurmdbd_conf and "StorageLoc=acct" in slurmdbd_conf


def test_a_changed_limit_changes_the_config():
    changed = rules_dict()
    changed["limits"]["partitions"]["main"].update(max_time_s=90, default_time_s=60)
    slurm_conf, _ = render.render(rules(changed), VALUES)
    assert "MaxTime=1:30" in slurm_conf and "DefaultTime=1 " in slurm_conf


def test_gpu_partitions_are_refused_on_the_local_cluster():
    changed = rules_dict()
    changed["limits"]["partitions"]["main"]["gpus"] = 1
    with pytest.raises(ValueError, match="gpus must be 0"):
        render.render(rules(changed), VALUES)


def test_the_runners_partition_is_the_maintainers_own_nodes():
    slurm_conf, _ = render.render(rules(), VALUES)
    partition = next(line for line in slurm_conf.splitlines() if line.startswith("PartitionName=runners"))
    fields = dict(field.split("=", 1) for field in partition.split())
    assert fields["Nodes"] == "runner[1-3]" and fields["AllowAccounts"] == "kb-runners" and fields["Default"] == "NO"
    # Three slurmd of one host: an address and a port each; no GRES on a machine without GPUs (the CPU profile).
    assert "NodeName=runner[1-3] NodeAddr=127.0.0.[2-4] Port=6827-6829 CPUs=2 RealMemory=20000" in slurm_conf
    assert "Gres" not in slurm_conf and "AccountingStorageEnforce=associations" in slurm_conf
    one, _ = render.render(rules(), {**VALUES, "runner_count": 1})
    assert "NodeName=runner1 NodeAddr=127.0.0.2 Port=6827 " in one and "Nodes=runner1 " in one


def test_rules_without_a_runners_partition_render_no_runner_nodes():
    changed = rules_dict()
    for check in changed["checks"]:
        check.pop("partition"), check.pop("gres")
    del changed["limits"]["partitions"]["runners"]
    slurm_conf, _ = render.render(rules(changed), VALUES)
    assert "NodeName=runner" not in slurm_conf and "PartitionName=runners" not in slurm_conf
    assert "AllowAccounts=" not in slurm_conf


def test_every_nodes_spool_is_hidden_from_jobs(tmp_path):
    """slurm.conf names the spool per node (spool/%n); the scheduler hides the folder above, every node's spool."""
    from services.scheduler.server import slurm_state_dirs

    slurm_conf, _ = render.render(rules(), VALUES)
    (tmp_path / "slurm.conf").write_text(slurm_conf)
    assert slurm_state_dirs(str(tmp_path / "slurm.conf")) == ("/state/ctld", "/state/spool")


def test_on_a_gpu_machine_one_runner_holds_every_gpu():
    slurm_conf, _ = render.render(rules(), {**VALUES, "gpus": 2})
    assert "NodeName=runner1 NodeAddr=127.0.0.2 Port=6827 Gres=gpu:2 CPUs=2" in slurm_conf
    assert "NodeName=runner[" not in slurm_conf and "Nodes=runner1 " in slurm_conf
    assert "GresTypes=gpu\nAccountingStorageTRES=gres/gpu\n" in slurm_conf
    assert render.gres_conf(2).endswith("NodeName=runner1 Name=gpu File=/dev/nvidia[0-1]\n")
    assert render.gres_conf(1).endswith("File=/dev/nvidia0\n")
    cpu_only, _ = render.render(rules(), VALUES)
    assert "Gres" not in cpu_only  # no GPU here: the runners run the CPU profile
