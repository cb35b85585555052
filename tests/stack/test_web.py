"""The web board as `make up` runs it: started by stack.py, waited for on /healthz, stopped by `down`; in front of a
real board service (its own process, on a database and a JetStream stream of the module's own)."""

import asyncio
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.common import auth
from services.common.config import METRICS_PORTS
from services.common.eventlog import EventLog
from tests.streams import delete_stream, stream_settings
from tests.support.databases import create_database, drop_database

from .conftest import free_port


async def _database_with_web_identity() -> tuple[str, str, str]:
    name, url = await create_database("stackweb")
    log = await EventLog.connect(url, migrate=True)
    try:
        async with log.pool.acquire() as conn:
            await auth.register_principal(
                conn, "system:web", auth.SERVICE, "system:web", auth.SIGNED_IN, log=log, actor="system:admin"
            )
            token = await auth.issue_token(conn, "system:web")
    finally:
        await log.close()
    return name, url, token


def _serving(port: int) -> bool:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
        except grpc.RpcError:
            return False
        return reply.status == health_pb2.HealthCheckResponse.SERVING


@pytest.fixture(scope="module")
def board_service(tmp_path_factory):
    """The board service (python -m services.board.server) on an empty log: (its gRPC port, system:web's token)."""
    name, url, token = asyncio.run(_database_with_web_identity())
    settings = stream_settings("stackweb")
    port = free_port()
    env = {
        **os.environ,
        "KB_DATABASE_URL": url,
        "KB_NATS_URL": settings.nats_url,
        "KB_EVENTS_STREAM": settings.events_stream,
        "KB_EVENTS_SUBJECT_PREFIX": settings.events_subject_prefix,
        "KB_BOARD_PORT": str(port),
        "KB_BOARD_METRICS_PORT": str(free_port()),
        "KB_PG_POOL_MIN_SIZE": "1",
        "KB_PG_POOL_MAX_SIZE": "2",
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
    }
    log = tmp_path_factory.mktemp("board") / "board.log"
    with open(log, "wb") as out:
        board = subprocess.Popen([sys.executable, "-m", "services.board.server"], env=env, stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + 60
        while not _serving(port):
            assert board.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        yield port, token
    finally:
        board.terminate()
        board.wait(30)
        asyncio.run(delete_stream(settings))
        asyncio.run(drop_database(name))


def web_env(tmp_path, board_port: int, web_port: int, token: str | None) -> dict[str, str]:
    token_file = tmp_path / "web.token"
    if token is not None:
        token_file.write_text(token + "\n")
    return {
        **os.environ,
        "KB_HOME": str(tmp_path),
        "KB_BOARD_ADDR": f"127.0.0.1:{board_port}",
        "KB_WEB_PORT": str(web_port),
        "KB_WEB_METRICS_PORT": str(METRICS_PORTS["web"]),  # the web_port fixture's
        "KB_WEB_TOKEN_FILE": str(token_file),
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
    }


@pytest.fixture
def web_port(components, monkeypatch):
    """Both of the web board's ports moved off the fixed ones, which a `make up` stack on this machine holds."""
    port = free_port()
    monkeypatch.setitem(components.HTTP_PORTS, "web", port)
    monkeypatch.setitem(components.METRICS_PORTS, "web", free_port())
    return port


def start_web(components, processes, layout, env):
    module = components.component_modules()["web"]
    return processes.start_process(layout, "web", [sys.executable, "-m", module], module, env)


def test_up_starts_the_web_board_waits_for_its_healthz_and_down_stops_it(
    components, processes, layout, board_service, web_port, tmp_path
):
    board_port, token = board_service
    components.ensure_ports_free("web", layout)
    pid, started = start_web(components, processes, layout, web_env(tmp_path, board_port, web_port, token))
    try:
        assert started
        components.wait_http_healthy(layout, "web", deadline_s=30)
        assert processes.running_pid(layout, "web", "services.web.server") == pid
        assert start_web(components, processes, layout, {}) == (pid, False)  # a second `up` finds it running
    finally:
        assert processes.stop_process(layout, "web", "services.web.server") == f"stopped (pid {pid})"


def test_a_web_board_that_cannot_start_fails_the_wait_at_once_naming_why(
    processes, components, stack, layout, web_port, tmp_path
):
    start_web(components, processes, layout, web_env(tmp_path, free_port(), web_port, None))
    with pytest.raises(stack.StackError) as failure:
        components.wait_http_healthy(layout, "web", deadline_s=60)
    message = str(failure.value)
    assert message.startswith("web exited at start; log ")
    assert "no token for system:web" in message


@pytest.mark.parametrize(
    ("token", "why"),
    [
        ("kb_" + "0" * 43, "the board service refuses the token of system:web (UNAUTHENTICATED)"),
        (None, "the board service does not answer (UNAVAILABLE)"),
    ],
)
def test_a_web_board_that_cannot_read_the_board_is_not_healthy_and_says_why(
    components, processes, stack, layout, board_service, web_port, tmp_path, token, why
):
    board_port = board_service[0] if token else free_port()
    pid, _ = start_web(components, processes, layout, web_env(tmp_path, board_port, web_port, token or "kb_unused"))
    try:
        with pytest.raises(stack.StackError) as failure:
            components.wait_http_healthy(layout, "web", deadline_s=3)
        assert f"web on http://127.0.0.1:{web_port}/healthz: not 200 after 3 s" in str(failure.value)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{web_port}/healthz", timeout=5)
        assert refused.value.code == 503 and refused.value.read().decode().strip() == why
    finally:
        processes.stop_process(layout, "web", "services.web.server")
