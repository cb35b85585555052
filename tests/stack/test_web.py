"""The web board as `make up` runs it: started by stack.py, waited for on /healthz, stopped by `down`."""

import os
import sys

import pytest
from grpc_health.v1 import health_pb2

from .conftest import free_port

BOARD = "kernelboard.v1.Board"


def web_env(tmp_path, board_port: int, web_port: int, token_file) -> dict[str, str]:
    return {
        **os.environ,
        "KB_HOME": str(tmp_path),
        "KB_BOARD_ADDR": f"127.0.0.1:{board_port}",
        "KB_WEB_PORT": str(web_port),
        "KB_WEB_METRICS_PORT": str(free_port()),
        "KB_WEB_TOKEN_FILE": str(token_file),
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
    }


def start_web(stack, layout, env):
    module = stack.component_modules()["web"]
    return stack.start_process(layout, "web", [sys.executable, "-m", module], module, env)


def test_up_starts_the_web_board_waits_for_its_healthz_and_down_stops_it(
    stack,
    layout,
    health_server,
    monkeypatch,
    tmp_path,
):
    servicer, board_port = health_server
    servicer.set(BOARD, health_pb2.HealthCheckResponse.SERVING)  # the board service, as far as /healthz asks
    web_port = free_port()
    monkeypatch.setitem(stack.HTTP_PORTS, "web", web_port)
    token = tmp_path / "web.token"
    token.write_text("kb_not_used_by_healthz\n")
    stack.ensure_ports_free("web", layout)
    pid, started = start_web(stack, layout, web_env(tmp_path, board_port, web_port, token))
    try:
        assert started
        stack.wait_http_healthy(layout, "web", deadline_s=30)
        assert stack.running_pid(layout, "web", "services.web.server") == pid
        assert start_web(stack, layout, {}) == (pid, False)  # a second `up` finds it running
    finally:
        assert stack.stop_process(layout, "web", "services.web.server") == f"stopped (pid {pid})"


def test_a_web_board_that_cannot_start_fails_the_wait_at_once_naming_why(stack, layout, monkeypatch, tmp_path):
    web_port = free_port()
    monkeypatch.setitem(stack.HTTP_PORTS, "web", web_port)
    start_web(stack, layout, web_env(tmp_path, free_port(), web_port, tmp_path / "missing.token"))
    with pytest.raises(stack.StackError) as failure:
        stack.wait_http_healthy(layout, "web", deadline_s=60)
    message = str(failure.value)
    assert message.startswith("web exited at start; log ")
    assert "no token for system:web" in message


def test_a_web_board_whose_board_service_is_down_is_not_healthy(stack, layout, monkeypatch, tmp_path):
    web_port = free_port()
    monkeypatch.setitem(stack.HTTP_PORTS, "web", web_port)
    token = tmp_path / "web.token"
    token.write_text("kb_token\n")
    pid, _ = start_web(stack, layout, web_env(tmp_path, free_port(), web_port, token))
    try:
        with pytest.raises(stack.StackError) as failure:
            stack.wait_http_healthy(layout, "web", deadline_s=3)
        assert f"web on http://127.0.0.1:{web_port}/healthz: not 200 after 3 s" in str(failure.value)
    finally:
        stack.stop_process(layout, "web", "services.web.server")
