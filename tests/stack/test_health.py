"""The stack's gRPC health wait, against a real gRPC server that serves grpc.health.v1."""

import json
import subprocess
import sys
import threading
import time

import pytest
from grpc_health.v1 import health_pb2

from .conftest import LOCAL, free_port

SERVICE = "kernelboard.v1.Ingest"


def serving(servicer, status=health_pb2.HealthCheckResponse.SERVING):
    servicer.set(SERVICE, status)


def test_a_serving_service_passes_at_once(probes, health_server):
    servicer, port = health_server
    serving(servicer)
    [result] = probes.check_health([probes.HealthTarget.parse(f"ingest=127.0.0.1:{port}")], deadline_s=10)
    assert result["status"] == "SERVING", result
    assert result["service"] == SERVICE
    assert result["seconds"] < 5


def test_a_service_that_comes_up_later_is_waited_for(probes, health_server):
    servicer, port = health_server
    serving(servicer, health_pb2.HealthCheckResponse.NOT_SERVING)
    threading.Timer(1.0, serving, args=(servicer,)).start()
    [result] = probes.check_health([probes.HealthTarget.parse(f"ingest=127.0.0.1:{port}")], deadline_s=15)
    assert result["status"] == "SERVING", result
    assert result["seconds"] >= 0.9


def test_not_serving_times_out_and_says_what_it_last_saw(probes, health_server):
    servicer, port = health_server
    serving(servicer, health_pb2.HealthCheckResponse.NOT_SERVING)
    start = time.monotonic()
    [result] = probes.check_health([probes.HealthTarget.parse(f"ingest=127.0.0.1:{port}")], deadline_s=1.5)
    assert result["status"] == "TIMEOUT"
    assert "NOT_SERVING" in result["detail"]
    assert time.monotonic() - start < 6


def test_another_service_on_the_port_is_not_taken_for_ours(probes, health_server):
    servicer, port = health_server
    servicer.set("kernelboard.v1.Board", health_pb2.HealthCheckResponse.SERVING)
    [result] = probes.check_health([probes.HealthTarget.parse(f"ingest=127.0.0.1:{port}")], deadline_s=1)
    assert result["status"] == "TIMEOUT"
    assert "NOT_FOUND" in result["detail"]


def test_nothing_listening_times_out_with_unavailable(probes):
    [result] = probes.check_health([probes.HealthTarget.parse(f"ingest=127.0.0.1:{free_port()}")], deadline_s=1)
    assert result["status"] == "TIMEOUT"
    assert "UNAVAILABLE" in result["detail"]


def test_a_process_that_exited_fails_at_once_not_at_the_deadline(probes):
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    spec = f"ingest=127.0.0.1:{free_port()}:{done.pid}"
    start = time.monotonic()
    [result] = probes.check_health([probes.HealthTarget.parse(spec)], deadline_s=60)
    assert result["status"] == "EXITED"
    assert str(done.pid) in result["detail"]
    assert time.monotonic() - start < 5


def test_bad_targets_are_refused_with_the_expected_form(probes):
    for spec in ("ingest", "ingest=127.0.0.1", "ingest=127.0.0.1:port", "=127.0.0.1:1"):
        with pytest.raises(ValueError, match="NAME=HOST:PORT"):
            probes.HealthTarget.parse(spec)
    target = probes.HealthTarget.parse("board=127.0.0.1:50054:42@custom.Service")
    assert (target.name, target.address, target.pid, target.service) == (
        "board",
        "127.0.0.1:50054",
        42,
        "custom.Service",
    )


def test_the_probe_cli_prints_one_json_line_per_target(health_server):
    servicer, port = health_server
    serving(servicer)
    probe = [sys.executable, str(LOCAL / "probes.py"), "health", "--deadline", "1"]
    done = subprocess.run(
        [*probe, f"ingest=127.0.0.1:{port}", f"board=127.0.0.1:{port}"], capture_output=True, text=True, timeout=60
    )
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["name"], r["status"]) for r in lines] == [("ingest", "SERVING"), ("board", "TIMEOUT")]
    assert done.returncode == 1


@pytest.fixture
def venv_layout(stack, tmp_path):
    """A checkout whose .venv/bin/python is this interpreter, so stack.py's venv-side probes run for real."""
    repo = tmp_path / "repo"
    bin_dir = repo / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    return stack.Layout(repo=repo, home=tmp_path / "state")


def test_the_stack_waits_for_health_through_the_venv(components, stack, venv_layout, health_server):
    servicer, port = health_server
    serving(servicer)
    ctx = stack.Context(layout=venv_layout, database_url="postgresql://x@127.0.0.1/kb", nats_url="nats://127.0.0.1:1")
    components.wait_healthy(ctx, [f"ingest=127.0.0.1:{port}"], deadline_s=10)


def test_a_failed_health_wait_names_the_service_and_shows_its_log(components, stack, venv_layout):
    ctx = stack.Context(layout=venv_layout, database_url="postgresql://x@127.0.0.1/kb", nats_url="nats://127.0.0.1:1")
    venv_layout.log_dir.mkdir(parents=True)
    venv_layout.log_file("scheduler").write_text("starting\nTraceback: boom at import\n")
    port = free_port()
    with pytest.raises(stack.StackError) as failure:
        components.wait_healthy(ctx, [f"scheduler=127.0.0.1:{port}"], deadline_s=1)
    message = str(failure.value)
    assert f"scheduler on 127.0.0.1:{port}" in message
    assert str(venv_layout.log_file("scheduler")) in message
    assert "boom at import" in message
