"""``kb admin`` against the real PostgreSQL and ``kb status`` against a real server, each run as the real command."""

import asyncio
import json
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest
from kernelboard.v1 import board_pb2, board_pb2_grpc

from services.common import auth, metrics
from services.common.auth import AuthError
from services.common.grpcserver import start_server
from tests.common.servicers import add_all

REPO = Path(__file__).resolve().parents[2]


async def kb(*args, env=None) -> tuple[int, str, str]:
    environ = {**os.environ, "PYTHONPATH": f"{REPO}:{REPO / 'protos'}", **(env or {})}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "services.cli.main", *args, cwd=REPO, env=environ,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode, out.decode(), err.decode()


@pytest.fixture(scope="module")
def admin(database_url):
    async def run(*args):
        return await kb("admin", *args, env={"KB_DATABASE_URL": database_url})

    return run


async def test_migrate_then_up_to_date(admin):
    rc, out, _ = await admin("migrate")
    applied = out.strip().removeprefix("applied migrations ").split(", ")
    assert rc == 0 and applied[:2] == ["0001", "0002"]
    rc, out, _ = await admin("migrate")
    assert (rc, out.strip()) == (0, "migrations up to date")


async def test_curator_with_a_token_signs_in_and_revoked_it_does_not(admin, event_log):
    rc, out, _ = await admin("user", "add", "curator", "--role", "maintainer")
    assert (rc, out.strip()) == (0, "registered person curator (maintainer)")
    rc, out, err = await admin("token", "issue", "curator")
    token = out.strip()
    assert rc == 0 and "shown once" in err and "does not expire" in err
    principal = await auth.authenticate(event_log.pool, token)
    assert (principal.name, principal.role) == ("curator", auth.MAINTAINER)
    (event,) = await event_log.read_stream("principal:curator")
    assert event.actor.startswith("operator:")

    rc, out, _ = await admin("token", "list", "curator", "--json")
    (listed,) = json.loads(out)
    assert listed["token_hash"] == auth.hash_token(token) and listed["state"] == "live"
    rc, out, _ = await admin("token", "revoke", listed["token_hash"])  # the hash is enough: the token may be lost
    assert (rc, out.strip()) == (0, "token revoked")
    with pytest.raises(AuthError, match="revoked"):
        await auth.authenticate(event_log.pool, token)
    rc, out, _ = await admin("token", "list", "curator")
    assert rc == 0 and out.splitlines()[1].split()[:2] == [auth.hash_token(token), "revoked"]
    rc, _, err = await admin("token", "list", "nobody")
    assert (rc, err.strip()) == (1, "kb: no principal named 'nobody'")
    rc, out, _ = await admin("token", "revoke", token)  # again, by the token itself: still revoked, no error
    assert (rc, out.strip()) == (0, "token revoked")
    rc, _, err = await admin("token", "revoke", token[:-1] + ("A" if token[-1] != "A" else "B"))
    assert (rc, err.strip()) == (1, "kb: unknown token: nothing revoked")


async def test_user_add_is_idempotent_only_when_asked(admin):
    assert (await admin("user", "add", "dora", "--role", "member"))[0] == 0
    rc, _, err = await admin("user", "add", "dora", "--role", "member")
    assert (rc, err.strip()) == (1, "kb: principal 'dora' already exists")
    rc, out, _ = await admin("user", "add", "dora", "--role", "member", "--exist-ok")
    assert (rc, out.strip()) == (0, "dora (member) already registered")
    rc, _, err = await admin("user", "add", "dora", "--role", "maintainer", "--exist-ok")
    assert (rc, err.strip()) == (1, "kb: dora already exists as dora (member), not as asked")


async def test_agents_services_and_listing(admin, event_log):
    rc, out, _ = await admin("user", "add", "bot", "--agent-of", "dora")
    assert (rc, out.strip()) == (0, "registered agent dora/bot (agent of dora, member)")
    rc, out, _ = await admin("user", "add", "scheduler", "--service", "--role", "member")
    assert (rc, out.strip()) == (0, "registered service scheduler (member)")
    rc, out, _ = await admin("token", "issue", "dora/bot", "--ttl-days", "0.5")
    assert rc == 0
    row = await event_log.pool.fetchrow(
        "SELECT expires_at FROM api_tokens WHERE token_hash = $1", auth.hash_token(out.strip())
    )
    assert abs(row["expires_at"] - (datetime.now(UTC) + timedelta(hours=12))) < timedelta(minutes=1)

    rc, out, _ = await admin("user", "list", "--json")
    users = {user["name"]: user for user in json.loads(out)}
    assert users["dora/bot"]["kind"] == "agent" and users["dora/bot"]["role"] == "member"
    assert users["dora/bot"]["live_tokens"] == 1 and users["scheduler"]["kind"] == "service"
    rc, out, _ = await admin("user", "list")
    assert out.splitlines()[0].split() == ["NAME", "KIND", "OWNER", "ROLE", "LIVE_TOKENS", "CREATED_AT"]


async def test_refusals_are_one_clear_line(admin):
    assert await admin("user", "add", "erin") == (
        2, "", "kb: --role is needed for a person or a service (maintainer, member or signed-in)\n"
    )  # fmt: skip
    rc, _, err = await admin("user", "add", "bot2", "--agent-of", "dora", "--role", "member")
    assert (rc, err.strip()) == (2, "kb: an agent takes its owner's role: drop --role member")
    rc, _, err = await admin("user", "add", "bot3", "--agent-of", "nobody")
    assert (rc, err.strip()) == (1, "kb: agent 'nobody/bot3': owner 'nobody' is not registered")
    rc, _, err = await admin("token", "issue", "nobody")
    assert (rc, err.strip()) == (1, "kb: no principal named 'nobody'")
    rc, _, err = await kb("admin", "migrate", env={"KB_DATABASE_URL": "postgresql://root@127.0.0.1:1/none"})
    assert rc == 1 and err.startswith("kb: database postgresql://root@127.0.0.1:1/none: ")


async def test_status_reports_each_service():
    started = await start_server("board", add_all, port=0)
    metrics_port = metrics.start_metrics_server(0, addr="127.0.0.1")
    closed = "127.0.0.1:1"
    env = {"KB_BOARD_ADDR": f"127.0.0.1:{started.port}", "KB_BOARD_METRICS_ADDR": f"127.0.0.1:{metrics_port}"}
    for service in ("ingest", "scheduler", "verifier"):
        env[f"KB_{service.upper()}_ADDR"] = closed
        env[f"KB_{service.upper()}_METRICS_ADDR"] = closed
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{started.port}") as channel:
            await board_pb2_grpc.BoardStub(channel).GetBoard(board_pb2.GetBoardRequest())
        rc, out, _ = await kb("status", "--json", "--timeout", "1", env=env)
        results = {result["service"]: result for result in json.loads(out)}
        assert rc == 1
        assert results["board"]["health"] == "SERVING" and results["board"]["metrics"] == "ok"
        assert results["board"]["ok"] is True
        assert results["ingest"]["health"] == "unreachable (UNAVAILABLE)" and results["ingest"]["ok"] is False
        assert results["ingest"]["metrics"].startswith("unreachable")
        rc, out, _ = await kb("status", "--timeout", "1", env=env)
        board_line = next(line for line in out.splitlines() if line.startswith("board"))
        assert "SERVING" in board_line and " ok" in board_line
    finally:
        await started.stop(0)
