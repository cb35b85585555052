"""What the runners' tests share: rules whose one check runs on the runners, route pushes through the verifier's
intake, a dispatcher on the test's database, driving it until checks end, and Slurm's record of a check's jobs."""

import asyncio
import subprocess
import time

from kernelboard.v1 import events_pb2

from services.common.eventlog import NewEvent
from services.common.sandbox import SandboxConfig, isolation_available
from services.verifier.dispatch import DispatchConfig, Dispatcher
from services.verifier.intake import Intake
from services.verifier.worker import WorkerConfig
from tests.verifier.conftest import CPU_SLOT, approve_rules, judge_files, route_name, rules_with_checks


def check(script: str, **more) -> dict:
    return {"name": "verify", "script": script, "metrics": "metrics.json", "time_limit_s": 60,
            "partition": "runners", **more}  # fmt: skip


def worker_config(home, max_attempts: int = 3) -> WorkerConfig:
    sandbox = SandboxConfig(root=home / "verifier" / "sandboxes", isolate=isolation_available(), hidden=(str(home),))
    return WorkerConfig(git_dir=home / "repo.git", sandbox=sandbox, slots=(CPU_SLOT,), max_attempts=max_attempts)


def dispatcher(queue, home, slurm_conf, *, name=None, **config) -> Dispatcher:
    settings = {"poll_s": 0.5, **config}
    return Dispatcher(queue, worker_config(home), DispatchConfig(slurm_conf, **settings), name=name)


async def push(log, queue, repo, rules_sha, *, owner="alice", route=None, files=None) -> list[str]:
    """A route commit on top of main, its CommitIngested handled by the verifier's intake; the checks queued."""
    route = route or route_name()
    files = {**judge_files(), **{f"routes/{route}/{k}": v for k, v in (files or {"kernel.py": "x = 1\n"}).items()}}
    sha = repo.commit(files, f"refs/heads/routes/{route}", parent=rules_sha, message=route)
    commit = events_pb2.CommitIngested(ref=f"refs/heads/routes/{route}", sha=sha, parent=rules_sha,
                                       kind=events_pb2.COMMIT_KIND_ROUTE, route=route, owner=owner)  # fmt: skip
    [event] = await log.append(f"route:{route}", None, [NewEvent(commit, actor=owner)])
    async with log.pool.acquire() as conn, conn.transaction():
        await Intake(log, queue).handle(conn, event)
    return [row.item.check_id for row in await queue.search(route=route)]


async def approve(log, queue, repo, script_body: str, **check_fields) -> str:
    """Rules whose one check runs ``script_body`` on the runners, approved and followed by the verifier's intake."""
    rules = rules_with_checks(check("checks/fast.sh", **check_fields))
    sha = await approve_rules(log, repo, rules, extra={"checks/fast.sh": script_body})
    approved = (await log.read_stream("rules"))[-1]
    async with log.pool.acquire() as conn, conn.transaction():
        await Intake(log, queue).handle(conn, approved)
    return sha


async def drive(dispatch: Dispatcher, done, timeout_s: float, *, during=None):
    """Cycles the dispatcher until ``done()`` (awaited) is true; ``during(dispatch)`` runs after each cycle."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        await dispatch.cycle()
        if during is not None:
            await during(dispatch)
        if await done():
            return
        await asyncio.sleep(dispatch.config.poll_s)
    raise AssertionError(f"not done within {timeout_s} s")


def jobs_named(slurm_conf: str, name: str) -> list[str]:
    done = subprocess.run(["sacct", "-X", "-P", "-n", f"--name={name}", "--starttime=now-1days", "--format=JobID"],
                          capture_output=True, text=True, env={"SLURM_CONF": slurm_conf, "PATH": "/usr/bin:/bin"},
                          check=True)  # fmt: skip
    return done.stdout.split()


async def finished(queue, check_ids) -> bool:
    states = [(await queue.get(c)).state for c in check_ids]
    return all(state in ("passed", "failed") for state in states)
