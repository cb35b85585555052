"""Verifier tests: a database and a JetStream stream of their own, a hosted repository built with plain git, and
RulesApproved/CommitIngested events appended as ingest would (the ingest service is not needed)."""

import asyncio
import json
import os
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import SimpleNamespace

import grpc
import pytest
from kernelboard.v1 import events_pb2, verifier_pb2_grpc

from services.common import auth
from services.common.config import Settings
from services.common.consumer import Consumer
from services.common.eventlog import EventLog, NewEvent
from services.common.grpcserver import start_server
from services.common.relay import Relay
from services.common.sandbox import SandboxConfig, isolation_available
from services.verifier.api import ChangeFeed, add_to_server
from services.verifier.intake import CONSUMER_NAME, EVENT_TYPES, Intake
from services.verifier.queue import CheckQueue
from services.verifier.worker import Slot, Worker, WorkerConfig
from tests.streams import delete_stream, stream_settings
from tests.support.databases import database_fixture

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CPU_SLOT = Slot("cpu", "cpu", "smoke", {"TRITON_INTERPRET": "1"})


database_url = database_fixture("verifier", scope="function")


@pytest.fixture
async def log(database_url):
    event_log = await EventLog.connect(database_url, min_size=2, max_size=12)
    yield event_log
    await event_log.close()


@pytest.fixture
def home():
    """KB_HOME of these tests; outside /tmp's pytest tree is not needed, the sandbox hides KB_HOME either way."""
    path = Path(tempfile.mkdtemp(prefix="kb_test_verifier_home_"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def settings(database_url, home):
    return stream_settings("verifier", database_url=database_url, home=home)


@pytest.fixture
async def stream(settings):
    """The test's JetStream stream, deleted afterwards."""
    yield settings
    await delete_stream(settings)


def worker_config(settings: Settings, *, lease_s: float = 30.0, poll_s: float = 0.2) -> WorkerConfig:
    return WorkerConfig(
        git_dir=settings.home / "repo.git",
        sandbox=SandboxConfig(
            root=settings.home / "verifier" / "sandboxes", isolate=isolation_available(), hidden=(str(settings.home),)
        ),
        slots=(CPU_SLOT,),
        lease_s=lease_s,
        poll_s=poll_s,
    )


@pytest.fixture
async def queue(log):
    return CheckQueue(log, lease_s=30.0)


class HostedRepo:
    """A bare repository like ingest's, committed to with plain git plumbing."""

    def __init__(self, git_dir: Path):
        self.git_dir = git_dir
        subprocess.run(["git", "init", "-q", "--bare", str(git_dir)], check=True)

    def git(self, *args: str, env: dict | None = None, cwd: Path | None = None) -> str:
        full_env = {
            **os.environ,
            "GIT_AUTHOR_NAME": "test",
            "GIT_AUTHOR_EMAIL": "test@kernelboard",
            "GIT_COMMITTER_NAME": "test",
            "GIT_COMMITTER_EMAIL": "test@kernelboard",
            **(env or {}),
        }
        done = subprocess.run(
            ["git", f"--git-dir={self.git_dir}", *args], env=full_env, cwd=cwd, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def commit(self, files: dict[str, str | bytes], ref: str, parent: str | None = None, message: str = "c") -> str:
        """A commit holding exactly `files`, on `ref`."""
        with tempfile.TemporaryDirectory() as tmp:
            tree_dir = Path(tmp) / "tree"
            for rel, content in files.items():
                path = tree_dir / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(content.encode() if isinstance(content, str) else content)
                if rel.endswith((".sh", ".sbatch")):
                    path.chmod(0o755)
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            self.git(f"--work-tree={tree_dir}", "add", "-A", ".", env=env, cwd=tree_dir)
            tree = self.git("write-tree", env=env)
            sha = self.git("commit-tree", tree, *(["-p", parent] if parent else []), "-m", message)
            self.git("update-ref", ref, sha)
            return sha


def judge_files(rules: dict | None = None, extra: dict[str, str] | None = None) -> dict[str, str | bytes]:
    """What main holds at the tag checks: the rules, the check scripts and the reference problems."""
    files: dict[str, str | bytes] = {
        "scienceslack.json": json.dumps(rules or project_rules(), indent=2),
        "checks/verify.sbatch": (REPO / "checks" / "verify.sbatch").read_bytes(),
    }
    for path in sorted((REPO / "kernels" / "problems").glob("*.py")):
        files[f"kernels/problems/{path.name}"] = path.read_bytes()
    files.update(extra or {})
    return files


def project_rules() -> dict:
    return json.loads((REPO / "scienceslack.json").read_text())


def rules_with_checks(*checks: dict) -> dict:
    rules = project_rules()
    rules["checks"] = list(checks)
    return rules


@pytest.fixture
def repo(home) -> HostedRepo:
    return HostedRepo(home / "repo.git")


async def approve_rules(log: EventLog, repo: HostedRepo, rules: dict, extra: dict[str, str] | None = None) -> str:
    """Commits the judge on main, points the tag checks at it and appends RulesApproved, as ingest does."""
    files = judge_files(rules, extra)
    sha = repo.commit(files, "refs/heads/main", message="rules")
    repo.git("update-ref", "refs/tags/checks", sha)
    approved = events_pb2.RulesApproved(
        rules_commit=sha, benchmark_version=rules["benchmark"]["version"], rules_json=files["scienceslack.json"]
    )
    await log.append("rules", None, [NewEvent(approved, actor="curator")])
    return sha


async def push_route(
    log: EventLog, repo: HostedRepo, route: str, route_files: dict[str, str], base: str
) -> tuple[str, str]:
    """A route commit (main's files + routes/<route>/...) and its CommitIngested; returns (sha, event id)."""
    files = {**judge_files(), **{f"routes/{route}/{name}": text for name, text in route_files.items()}}
    sha = repo.commit(files, f"refs/heads/routes/{route}", parent=base, message=f"route {route}")
    commit = events_pb2.CommitIngested(
        ref=f"refs/heads/routes/{route}",
        sha=sha,
        parent=base,
        kind=events_pb2.COMMIT_KIND_ROUTE,
        route=route,
        changed_paths=[f"routes/{route}/{name}" for name in route_files],
        owner="alice",
    )
    [event] = await log.append(f"route:{route}", None, [NewEvent(commit, actor="alice")])
    return sha, event.event_id


def route_name() -> str:
    return f"r{secrets.token_hex(4)}"


def metrics_script(body: str) -> str:
    """A check script (bash) whose body runs first, then writes a valid metrics file to its second argument."""
    return (
        "#!/usr/bin/env bash\nset -u\n"
        + body
        + '\ncat > "$2" <<JSON\n{"score": 1.5, "cost": 0.25, "passed": true, "runner": "cpu", '
        '"subtasks": [{"id": "new_gelu", "passed": true, "submitted": true, "speedup": 1.5}]}\nJSON\n'
    )


@pytest.fixture
async def service(log, stream, queue):
    """Relay, the verifier's consumer and one CPU worker running, and its gRPC server on a free port."""
    settings = stream
    relay = Relay(log, settings, poll_interval_s=0.2)
    consumer = Consumer(CONSUMER_NAME, log, settings, Intake(log, queue).handle, types=set(EVENT_TYPES))
    worker = Worker(queue, worker_config(settings), CPU_SLOT, name="e2e")
    feed = ChangeFeed(log.pool)
    server = await start_server("verifier", lambda s: add_to_server(s, queue, feed), port=0, pool=log.pool)
    tasks = [asyncio.create_task(c.run()) for c in (relay, consumer, worker)]
    async with asyncio.timeout(30):
        await consumer.ready.wait()
    async with log.pool.acquire() as conn:
        await auth.register_principal(conn, "alice", auth.PERSON, "alice", auth.MEMBER, log=log, actor="test")
        token = await auth.issue_token(conn, "alice")
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")
    try:
        yield SimpleNamespace(
            stub=verifier_pb2_grpc.VerifierStub(channel),
            signed_in=(("authorization", f"Bearer {token}"),),
            address=f"127.0.0.1:{server.port}",
            token=token,
        )
    finally:
        await channel.close()
        for component in (relay, consumer, worker):
            await component.stop()
        await asyncio.gather(*tasks)
        await server.stop(0)
        await feed.close()
