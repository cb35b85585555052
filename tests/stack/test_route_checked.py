"""`make up`'s main wait: the verifier's CheckCompleted of the bundled route's head, read from the real event log."""

import asyncio
import json
import subprocess
import sys
import uuid

import pytest

from .conftest import LOCAL

eventlog = pytest.importorskip("services.common.eventlog", reason="the event log (services/common/eventlog.py)")
asyncpg = pytest.importorskip("asyncpg")

from kernelboard.v1 import events_pb2  # noqa: E402

ADMIN_URL = "postgresql://root@127.0.0.1:5432/postgres"


@pytest.fixture
def database_url():
    name = f"kb_test_stack_{uuid.uuid4().hex[:10]}"

    async def admin(sql):
        conn = await asyncpg.connect(ADMIN_URL)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(admin(f"CREATE DATABASE {name}"))
    yield f"postgresql://root@127.0.0.1:5432/{name}"
    asyncio.run(admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


def append_commit(url, route, sha="ab" * 20):
    async def append():
        log = await eventlog.EventLog.connect(url, migrate=True)
        try:
            payload = events_pb2.CommitIngested(
                ref=f"refs/heads/routes/{route}", sha=sha, kind=events_pb2.COMMIT_KIND_ROUTE, route=route
            )
            await log.append(f"route:{route}", None, [eventlog.NewEvent(payload=payload, actor="curator")])
        finally:
            await log.close()

    asyncio.run(append())


def append_check(url, route, passed=True, score=1.25, sha="ab" * 20, commit=True):
    """A CheckCompleted of ``sha`` on ``route``, after its CommitIngested (``commit``)."""
    if commit:
        append_commit(url, route, sha)

    async def append():
        log = await eventlog.EventLog.connect(url, migrate=True)
        try:
            check_id = str(uuid.uuid4())
            payload = events_pb2.CheckCompleted(
                check_id=check_id,
                check_name="verify",
                ref=f"routes/{route}",
                sha=sha,
                route=route,
                passed=passed,
                reasons=[] if passed else ["atol broken on 3_matmul"],
                score=score,
                runner="cpu",
            )
            await log.append(f"check:{check_id}", 0, [eventlog.NewEvent(payload=payload, actor="system:verifier")])
        finally:
            await log.close()

    asyncio.run(append())


def probe(url, *args, timeout=60):
    argv = [sys.executable, str(LOCAL / "probes.py"), "route-checked", "triton", "--database-url", url, *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def test_only_a_check_of_the_bundled_route_ends_the_wait(database_url):
    append_check(database_url, "someone-else")
    done = probe(database_url, "--deadline", "2")
    assert done.returncode != 0
    assert "no CheckCompleted for route triton in the event log after 2 s" in done.stderr
    append_check(database_url, "triton", passed=True, score=1.25)
    done = probe(database_url, "--deadline", "30")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["passed"], result["score"], result["runner"], result["sha"]) == (True, 1.25, "cpu", "ab" * 20)


def test_the_wait_ends_on_the_check_of_the_routes_head_not_an_earlier_commits(database_url):
    """The seed pushes the route twice (version 1's commit, then its commit on version 2): make up waits for the
    check of the latest, the one on the newest board."""
    append_check(database_url, "triton", sha="a1" * 20, score=1.0)
    append_commit(database_url, "triton", sha="b2" * 20)
    done = probe(database_url, "--deadline", "2")
    assert done.returncode != 0 and "no CheckCompleted for route triton" in done.stderr
    append_check(database_url, "triton", sha="b2" * 20, score=2.0, commit=False)
    done = probe(database_url, "--deadline", "30")
    assert done.returncode == 0, done.stderr
    assert (json.loads(done.stdout)["sha"], json.loads(done.stdout)["score"]) == ("b2" * 20, 2.0)


def test_a_failed_check_is_reported_with_its_reasons(database_url):
    append_check(database_url, "triton", passed=False, score=0.0)
    result = json.loads(probe(database_url, "--deadline", "30").stdout)
    assert result["passed"] is False
    assert result["reasons"] == ["atol broken on 3_matmul"]


def test_a_watched_process_that_exited_ends_the_wait_at_once(database_url):
    append_check(database_url, "someone-else")  # creates the schema; no check of triton
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    done = probe(database_url, "--deadline", "120", "--watch", f"verifier={gone.pid}")
    assert done.returncode != 0
    assert f"verifier (pid {gone.pid}) exited" in done.stderr


def test_the_stack_reports_the_check_through_the_venv(components, stack, database_url, tmp_path):
    append_check(database_url, "triton", passed=True, score=2.5)
    bin_dir = tmp_path / "repo" / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_dir / "python").chmod(0o755)
    layout = stack.Layout(repo=tmp_path / "repo", home=tmp_path / "state")
    ctx = stack.Context(layout=layout, database_url=database_url, nats_url="nats://127.0.0.1:4222")
    check = components.step_route_checked(ctx, deadline_s=30)
    assert check["passed"] is True and check["score"] == 2.5
