"""Where one push's milliseconds go, server and client side: pushes one at a time to an in-process ingest (its own
throwaway database and hosted repository, the gRPC server on a loopback port) and times each step.

    PYTHONPATH=$PWD:$PWD/protos .venv/bin/python bench/load/profile_push.py --pushes 40

Server side: every git subprocess ingest runs (by git command) and the phases of Ingest.push. Client side: the git
commands an agent runs to make a push (commit, bundle) and the Push call as it sees it. Medians over the pushes, in ms.
The timers wrap ingest's functions from outside (this script); nothing in the service is changed to be measured.
"""

import argparse
import asyncio
import functools
import json
import resource
import statistics
import subprocess
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import grpc
from kernelboard.v1 import events_pb2, ingest_pb2, ingest_pb2_grpc

from services.common import auth
from services.common.eventlog import EventLog
from services.common.grpcserver import start_server
from services.common.logs import configure_logging
from services.ingest import gitobjects, gitrepo, quarantine
from services.ingest.api import add_to_server
from services.ingest.app import Ingest
from services.ingest.gitrepo import HostedRepo
from services.ingest.seed import seed
from services.ingest.server import watch_children_with_pidfd
from tests.support.databases import throwaway_database

spans: dict[str, list[float]] = defaultdict(list)


def timed(name, fn):
    """``fn`` (sync or async) with its wall time added to spans[name]; ``name`` may be a function of the args."""

    if asyncio.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def wrapper(*args, **kwargs):
            started = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                spans[name(*args) if callable(name) else name].append(time.perf_counter() - started)

    else:

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spans[name(*args) if callable(name) else name].append(time.perf_counter() - started)

    return wrapper


def instrument() -> None:
    """Timers around ingest's git subprocesses and push phases (whichever of them this version has)."""
    for module in (gitobjects, gitrepo):  # Objects' git runs and HostedRepo's own (commit-tree)
        module.run_git = timed(lambda git_dir, *args, **kw: f"server git {args[0]}", module.run_git)
    for name in ("_push", "_check_writer", "_check", "_record", "_sync_git_ref", "rules_at_tag"):
        if hasattr(Ingest, name):
            setattr(Ingest, name, timed(f"server Ingest.{name}", getattr(Ingest, name)))
    for cls, name in ((quarantine.Quarantine, "migrate"), (quarantine.Quarantine, "unbundle"), (EventLog, "append")):
        if hasattr(cls, name):
            setattr(cls, name, timed(f"server {cls.__name__}.{name}", getattr(cls, name)))


def cpu_s(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


client_cpu = [0.0]


def client_git(cwd: Path, *args: str) -> bytes:
    started, cpu = time.perf_counter(), cpu_s(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        ["git", "-c", "user.name=agent", "-c", "user.email=a@example.org", "-C", str(cwd), *args],
        check=True,
        capture_output=True,
    ).stdout
    spans[f"client git {args[0]}"].append(time.perf_counter() - started)
    client_cpu[0] += cpu_s(resource.RUSAGE_CHILDREN) - cpu
    return out


async def profile(pushes: int, home: Path, database_url: str) -> dict:
    watch_children_with_pidfd()  # as the server does
    log = await EventLog.connect(database_url)
    ingest = Ingest(log, HostedRepo(home / "repo.git"))
    await ingest.start()
    await seed(ingest, home)
    async with log.pool.acquire() as conn:
        await auth.register_principal(
            conn, "prof", events_pb2.PRINCIPAL_KIND_PERSON, "prof", events_pb2.ROLE_MEMBER, log=log, actor="profile"
        )
        token = await auth.issue_token(conn, "prof")
    server = await start_server("ingest", lambda s: add_to_server(s, ingest), port=0, pool=log.pool)
    md = (("authorization", f"Bearer {token}"),)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            stub = ingest_pb2_grpc.IngestStub(channel)
            await stub.StartRoute(ingest_pb2.StartRouteRequest(route="prof"), metadata=md)
            fetched = await stub.Fetch(ingest_pb2.FetchRequest(refs=["routes/prof"]), metadata=md)
            (home / "prof.bundle").write_bytes(fetched.bundle)
            clone = home / "clone"
            subprocess.run(
                ["git", "clone", "-q", "-b", "routes/prof", str(home / "prof.bundle"), str(clone)], check=True
            )
            (clone / "routes" / "prof").mkdir(parents=True)
            base = client_git(clone, "rev-parse", "HEAD").decode().strip()
            instrument()
            spans.clear()
            client_cpu[0] = 0.0
            cpu_self, cpu_children = cpu_s(resource.RUSAGE_SELF), cpu_s(resource.RUSAGE_CHILDREN)
            ref = "refs/heads/routes/prof"
            for n in range(pushes):
                (clone / "routes/prof/metrics.json").write_text(
                    json.dumps({"score": 1 + n / 1000, "cost": 0, "subtasks": []})
                )
                client_git(clone, "add", "-A")
                client_git(clone, "commit", "-q", "-m", f"score {n}")
                bundle = client_git(clone, "bundle", "create", "-q", "-", ref, f"^{base}")
                started = time.perf_counter()
                reply = await stub.Push(ingest_pb2.PushRequest(ref=ref, bundle=bundle), metadata=md)
                spans["client Push call"].append(time.perf_counter() - started)
                base = reply.sha
            # This process is the server and the client's gRPC side; its children are git, the agent's and ingest's.
            cpu = {
                "ingest_process_and_grpc_client_ms": (cpu_s(resource.RUSAGE_SELF) - cpu_self) / pushes * 1000,
                "server_git_ms": (cpu_s(resource.RUSAGE_CHILDREN) - cpu_children - client_cpu[0]) / pushes * 1000,
                "client_git_ms": client_cpu[0] / pushes * 1000,
            }
    finally:
        await server.stop(0)
        await log.close()
    return {name: round(ms, 2) for name, ms in cpu.items()}, {
        name: {"per_push": round(len(values) / pushes, 2), "median_ms": round(statistics.median(values) * 1000, 2)}
        for name, values in sorted(spans.items())
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pushes", type=int, default=40)
    args = parser.parse_args()
    configure_logging("ingest")  # as the server does (INFO, stderr): the logging is part of a push's cost
    async with throwaway_database("profile") as url:
        with tempfile.TemporaryDirectory(prefix="kb-profile-") as home:
            cpu, result = await profile(args.pushes, Path(home), url)
    print(json.dumps({"pushes": args.pushes, "cpu_per_push": cpu, "spans": result}, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
