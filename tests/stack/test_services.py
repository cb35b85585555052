"""PostgreSQL and NATS: reused when they answer, started from deploy/local when they do not, stopped only when ours."""

import os
import shutil
import socket
import subprocess

import pytest

from tests.missing import missing_service

from .conftest import free_port

MACHINE_NATS = "nats://127.0.0.1:4222"
MACHINE_POSTGRES = "postgresql://root@127.0.0.1:5432/kernelboard"


def test_the_machines_nats_is_recognised_with_jetstream(processes):
    info = processes.nats_info("127.0.0.1", 4222)
    assert info is not None and info["jetstream"] is True


def test_a_port_that_is_not_nats_is_not_taken_for_it(processes):
    assert processes.tcp_answers("127.0.0.1", 5432)
    assert processes.nats_info("127.0.0.1", 5432, timeout_s=1) is None
    assert processes.nats_info("127.0.0.1", free_port()) is None


def test_answering_servers_are_reused_and_never_stopped(datastores, processes, stack, layout):
    ctx = stack.Context(layout=layout, database_url=MACHINE_POSTGRES, nats_url=MACHINE_NATS)
    assert datastores.step_nats(ctx).startswith("reusing the server on 127.0.0.1:4222")
    assert datastores.step_postgres(ctx) == "reusing the server on 127.0.0.1:5432"
    assert not layout.pid_file("nats").exists() and not layout.pid_file("postgres").exists()
    assert datastores.stop_postgres(layout) == "not started by the stack"
    assert processes.stop_process(layout, "nats", str(layout.repo / "deploy/local/nats.conf")) == "not running"
    assert processes.tcp_answers("127.0.0.1", 5432) and processes.nats_info("127.0.0.1", 4222)


@pytest.mark.skipif(not shutil.which("nats-server"), reason=missing_service("NATS", "nats-server is not installed"))
def test_nats_starts_from_deploy_local_with_jetstream_under_the_state_dir(datastores, processes, layout):
    port, monitor = free_port(), free_port()
    pid, started = datastores.start_nats(layout, port, monitor)
    try:
        assert started
        info = processes.nats_info("127.0.0.1", port)
        assert info["jetstream"] is True
        assert datastores.nats_healthy(monitor)
        assert (layout.home / "nats" / "jetstream").is_dir()
        assert datastores.start_nats(layout, port, monitor) == (pid, False)
    finally:
        assert processes.stop_process(layout, "nats", str(layout.repo / "deploy/local/nats.conf")).startswith("stopped")
    assert processes.nats_info("127.0.0.1", port) is None


def test_nats_that_cannot_start_fails_with_its_log(datastores, processes, stack, layout):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        with pytest.raises(stack.StackError, match=r"nats-server exited at start; log .*nats\.log") as failure:
            datastores.start_nats(layout, port, free_port(), deadline_s=20)
    assert "address already in use" in str(failure.value)
    assert processes.running_pid(layout, "nats", str(layout.repo / "deploy/local/nats.conf")) is None


@pytest.mark.skipif(
    os.geteuid() != 0 or subprocess.run(["id", "postgres"], capture_output=True).returncode != 0,
    reason=missing_service("PostgreSQL", "starting a cluster needs root and the postgres user"),
)
def test_a_throwaway_postgres_cluster_starts_takes_a_database_and_stops(datastores, processes, stack, probes, layout):
    import asyncio

    assert datastores.find_postgres_bin("initdb"), "PostgreSQL's initdb is not installed"
    port = free_port()
    ctx = stack.Context(layout=layout, database_url=f"postgresql://root@127.0.0.1:{port}/kernelboard", nats_url="")
    cluster = datastores.postgres_data_dir(layout)
    try:
        assert datastores.step_postgres(ctx).startswith(f"started a throwaway cluster in {cluster} on 127.0.0.1:{port}")
        pid, recorded = datastores.our_postgres(layout)
        assert recorded == cluster
        assert datastores.step_postgres(ctx) == f"already running (ours, pid {pid}, {cluster})"
        assert asyncio.run(probes.ensure_database(ctx.database_url)) == "created database kernelboard"
        assert asyncio.run(probes.ensure_database(ctx.database_url)) == "database kernelboard exists"
    finally:
        outcome = datastores.stop_postgres(layout)
        shutil.rmtree(cluster.parent if cluster.parent.name.startswith("kernelboard-") else cluster, ignore_errors=True)
    assert outcome == f"stopped (pid {pid})"
    assert not layout.pid_file("postgres").exists()
    assert not processes.tcp_answers("127.0.0.1", port)


def test_a_slurm_conf_with_no_controller_behind_it_is_not_reused(stack, tmp_path):
    conf = tmp_path / "slurm.conf"
    conf.write_text(f"ClusterName=nowhere\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort={free_port()}\n")
    assert stack.slurm_answers(str(conf)) is False


@pytest.mark.skipif(
    not os.environ.get("SLURM_CONF"),
    reason=missing_service("Slurm", "no SLURM_CONF: the local Slurm cluster is not up"),
)
def test_the_running_slurm_cluster_is_reused(stack, layout):
    ctx = stack.Context(layout=layout, database_url=MACHINE_POSTGRES, nats_url=MACHINE_NATS)
    assert stack.step_slurm(ctx) == (
        f"reusing the cluster of SLURM_CONF={os.environ['SLURM_CONF']}; checks run on the runners' partition runners"
        " (KB_VERIFIER_DISPATCH=slurm)"
    )
    assert ctx.slurm_conf == os.environ["SLURM_CONF"] and ctx.runners == "runners"
    assert ctx.service_env()["KB_VERIFIER_DISPATCH"] == "slurm"
