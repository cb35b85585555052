"""The scheduler's test stack: the real Slurm (deploy/local/slurm/up.sh), a real ingest and the real scheduler
process (`python -m services.scheduler.server`), each test module on its own PostgreSQL database and KB_HOME.

The Slurm tests must run in CI; elsewhere they are skipped when SLURM_CONF is not set.
"""

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from kernelboard.v1 import events_pb2, ingest_pb2, ingest_pb2_grpc, scheduler_pb2, scheduler_pb2_grpc

from services.common import auth
from services.common.eventlog import EventLog
from services.common.grpcserver import start_server
from services.ingest.api import add_to_server
from services.ingest.app import Ingest
from services.ingest.gitrepo import HostedRepo
from services.ingest.seed import seed
from tests.support.databases import create_database, drop_database
from tests.support.slurm import skip_without_slurm

ROOT = Path(__file__).resolve().parents[2]


def pytest_collection_modifyitems(config, items):
    skip_without_slurm(items)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def git(*args: str, cwd: Path | None = None, env: dict | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, env={**os.environ, **(env or {})}, check=False
    )
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


class SchedulerProcess:
    """The scheduler as operators run it; kill() is kill -9."""

    def __init__(self, env: dict, log_path: Path):
        self.env = env
        self.log_path = log_path
        self.process: subprocess.Popen | None = None
        self.port = int(env["KB_SCHEDULER_PORT"])

    async def start(self) -> None:
        with open(self.log_path, "a") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "services.scheduler.server"], env=self.env, stdout=log, stderr=log, cwd=ROOT
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"scheduler exited: {self.log_path.read_text()[-3000:]}"
            try:
                async with grpc.aio.insecure_channel(f"127.0.0.1:{self.port}") as channel:
                    await asyncio.wait_for(channel.channel_ready(), 1)
                    return
            except TimeoutError:
                await asyncio.sleep(0.2)
        raise AssertionError(f"scheduler not serving within 60 s: {self.log_path.read_text()[-3000:]}")

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


@dataclass
class Stack:
    log: object
    home: Path
    tokens: dict[str, str]
    ingest: ingest_pb2_grpc.IngestStub
    scheduler: scheduler_pb2_grpc.SchedulerStub
    process: SchedulerProcess
    jobs_root: Path
    clones: dict[str, Path] = field(default_factory=dict)

    def md(self, who: str):
        return (("authorization", f"Bearer {self.tokens[who]}"),)

    async def push_script(self, who: str, route: str, name: str, text: str, extra: dict | None = None) -> str:
        """Commit routes/<route>/<name> (and extra files) on the route and push it through ingest; returns the sha."""
        clone = self.clones[route]
        files = {name: text, **(extra or {})}
        for path, content in files.items():
            target = clone / "routes" / route / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
        git("add", "-A", cwd=clone)
        identity = {
            "GIT_AUTHOR_NAME": who,
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": who,
            "GIT_COMMITTER_EMAIL": "t@t",
        }
        git("commit", "-q", "-m", f"add {name}", cwd=clone, env=identity)
        base = git("rev-parse", "HEAD^", cwd=clone)
        bundle = clone.parent / f"{route}.bundle"
        ref = f"refs/heads/routes/{route}"
        git("update-ref", ref, "HEAD", cwd=clone)
        git("bundle", "create", "-q", str(bundle), ref, f"^{base}", cwd=clone)
        reply = await self.ingest.Push(
            ingest_pb2.PushRequest(ref=ref, bundle=bundle.read_bytes()), metadata=self.md(who)
        )
        return reply.sha

    async def submit(self, who: str, route: str, sha: str, name: str) -> scheduler_pb2.Job:
        request = scheduler_pb2.SubmitJobRequest(
            ref=f"refs/heads/routes/{route}", sha=sha, script_path=f"routes/{route}/{name}"
        )
        return await self.scheduler.SubmitJob(request, metadata=self.md(who))

    async def job(self, job_id: str, who: str = "curator") -> scheduler_pb2.Job:
        return await self.scheduler.GetJob(scheduler_pb2.GetJobRequest(job_id=job_id), metadata=self.md(who))

    async def wait_job(self, job_id: str, predicate, timeout_s: float, what: str) -> scheduler_pb2.Job:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                job = await self.job(job_id)
                if predicate(job):
                    return job
            except grpc.aio.AioRpcError as err:
                if err.code() != grpc.StatusCode.UNAVAILABLE:  # the scheduler may be restarting
                    raise
                job = None
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job_id}: not {what} within {timeout_s} s; last seen {job}")
            await asyncio.sleep(0.5)

    async def job_events(self, job_id: str) -> list[events_pb2.Event]:
        return await self.log.read_stream(f"job:{job_id}")


CAST = [
    ("alice", events_pb2.PRINCIPAL_KIND_PERSON, "alice", events_pb2.ROLE_MEMBER),
    ("alice/agent-1", events_pb2.PRINCIPAL_KIND_AGENT, "alice", events_pb2.ROLE_UNSPECIFIED),
    ("bob", events_pb2.PRINCIPAL_KIND_PERSON, "bob", events_pb2.ROLE_MEMBER),
    ("mallory", events_pb2.PRINCIPAL_KIND_PERSON, "mallory", events_pb2.ROLE_SIGNED_IN),
]
ROUTES = {"fast": "alice", "outside": "mallory"}


@pytest.fixture(scope="module")
def jobs_root():
    """Job directories where the job user can reach them (pytest's own tmp is root's alone, mode 0700)."""
    root = Path(tempfile.mkdtemp(prefix="kb-test-jobs-", dir="/var/tmp"))
    root.chmod(0o711)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
async def stack(slurm_conf, tmp_path_factory, jobs_root):
    home = tmp_path_factory.mktemp("kb_home")
    db_name, database_url = await create_database("scheduler")
    log = await EventLog.connect(database_url, min_size=1, max_size=5)
    closing = []  # what to undo, newest first, however far the setup got
    try:
        ingest = Ingest(log, HostedRepo(home / "repo.git"))
        await ingest.start()
        await seed(ingest, home)
        tokens = {"curator": (home / "curator.token").read_text().strip()}
        async with log.pool.acquire() as conn:
            for name, kind, owner, role in CAST:
                await auth.register_principal(conn, name, kind, owner, role, log=log, actor="test")
                tokens[name] = await auth.issue_token(conn, name)
        ingest_server = await start_server(
            "ingest", lambda server: add_to_server(server, ingest), port=0, pool=log.pool
        )
        closing.append(lambda: ingest_server.stop(0))

        env = {
            **os.environ,
            "PYTHONPATH": f"{ROOT}:{ROOT / 'protos'}",
            "KB_DATABASE_URL": database_url,
            "KB_HOME": str(home),
            "SLURM_CONF": slurm_conf,
            "KB_INGEST_ADDR": f"127.0.0.1:{ingest_server.port}",
            "KB_SCHEDULER_PORT": str(free_port()),
            "KB_SCHEDULER_METRICS_PORT": str(free_port()),
            "KB_SCHEDULER_POLL_S": "0.5",
            "KB_JOB_RESULT_MAX_FILE_BYTES": "4096",
            "KB_JOB_RESULT_MAX_BYTES": "64000",
            "KB_JOBS_DIR": str(jobs_root),
        }
        process = SchedulerProcess(env, home / "scheduler.log")
        closing.append(process.stop)
        await process.start()
        ingest_channel = grpc.aio.insecure_channel(f"127.0.0.1:{ingest_server.port}")
        scheduler_channel = grpc.aio.insecure_channel(f"127.0.0.1:{process.port}")
        closing.extend([ingest_channel.close, scheduler_channel.close])
        stack = Stack(
            log,
            home,
            tokens,
            ingest_pb2_grpc.IngestStub(ingest_channel),
            scheduler_pb2_grpc.SchedulerStub(scheduler_channel),
            process,
            jobs_root,
        )
        for route, owner in ROUTES.items():
            await stack.ingest.StartRoute(ingest_pb2.StartRouteRequest(route=route), metadata=stack.md(owner))
            clone = home / "clones" / route
            git("clone", "-q", str(home / "repo.git"), str(clone))
            git("checkout", "-q", "-b", f"routes/{route}", f"origin/routes/{route}", cwd=clone)
            stack.clones[route] = clone
        yield stack
    finally:
        # Jobs left running by a failed test must not hold the shared cluster.
        for event in [e async for e in log.read_all(types={"JobSubmitted"})]:
            subprocess.run(
                ["scancel", event.job_submitted.job_id], env={**os.environ, "SLURM_CONF": slurm_conf}, check=False
            )
        for close in reversed(closing):
            result = close()
            if asyncio.iscoroutine(result):
                await result
        await log.close()
        await drop_database(db_name)
