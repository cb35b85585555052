"""Checks on the runners: what dispatching through Slurm adds to a check, and how many short checks an hour the
runners judge (docs/ARCHITECTURE.md, "Runners"). A benchmark, not a test: it prints what it measured.

    SLURM_CONF=... PYTHONPATH=$PWD:$PWD/protos python -m bench.verifier.runners_throughput [--checks 24]
        [--owners 3] [--sleep 2] [--poll 1]

The checks run a script that sleeps ``--sleep`` seconds and writes a valid metrics file (the harness's own time is
bench/verifier/results.md's smoke check). Path measured, per check: the intake queues it; the dispatcher (poll
``--poll`` s) claims it and builds its box (working copy, run.json), sbatch; Slurm starts the runner on a node
(``dispatched_to_running``: claim to the runner's first instruction); the runner's sandbox runs the script; sacct
reports the end, the dispatcher reads finished.json and the metrics file back and appends CheckCompleted
(``finished_to_completed``: the runner's last instruction to the append). Uses a throwaway database.
"""

import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from kernelboard.v1 import events_pb2

from services.common.eventlog import EventLog, NewEvent
from services.common.logs import configure_logging
from services.common.sandbox import SandboxConfig, isolation_available
from services.verifier.dispatch import DispatchConfig, Dispatcher
from services.verifier.intake import Intake
from services.verifier.queue import CheckQueue
from services.verifier.worker import WorkerConfig
from tests.support.databases import throwaway_database
from tests.verifier.conftest import CPU_SLOT, HostedRepo, approve_rules, judge_files, metrics_script, rules_with_checks


class Timed(Dispatcher):
    """The dispatcher, keeping each completed check's two overheads (from the runner's own clock readings)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.samples: list[tuple[float, float]] = []

    async def _complete(self, claim, verdict, elapsed_s, times, flight):
        if times and flight is not None:
            self.samples.append(
                (times["started_at"] - flight.dispatched_at.timestamp(), time.time() - times["finished_at"])
            )
        await super()._complete(claim, verdict, elapsed_s, times, flight)


async def measure(checks: int, owners: int, sleep_s: float, poll_s: float) -> dict:
    home = Path(tempfile.mkdtemp(prefix="kb_bench_runners_"))
    home.chmod(0o755)
    try:
        async with throwaway_database("bench_runners") as url:
            log = await EventLog.connect(url, min_size=2, max_size=8)
            try:
                return await _measure(log, home, checks, owners, sleep_s, poll_s)
            finally:
                await log.close()
    finally:
        shutil.rmtree(home, ignore_errors=True)


async def _measure(log, home: Path, checks: int, owners: int, sleep_s: float, poll_s: float) -> dict:
    queue = CheckQueue(log, runners=True)
    repo = HostedRepo(home / "repo.git")
    check = {"name": "verify", "script": "checks/short.sh", "metrics": "metrics.json", "time_limit_s": 60,
             "partition": "runners"}  # fmt: skip
    rules_sha = await approve_rules(log, repo, rules_with_checks(check),
                                    extra={"checks/short.sh": metrics_script(f"sleep {sleep_s}")})  # fmt: skip
    intake = Intake(log, queue)
    async with log.pool.acquire() as conn, conn.transaction():
        await intake.handle(conn, (await log.read_stream("rules"))[-1])
    for n in range(checks):
        owner, route = f"agent{n % owners}", f"bench{n}"
        files = {**judge_files(), f"routes/{route}/kernel.py": f"x = {n}\n"}
        sha = repo.commit(files, f"refs/heads/routes/{route}", parent=rules_sha, message=route)
        commit = events_pb2.CommitIngested(ref=f"refs/heads/routes/{route}", sha=sha, parent=rules_sha,
                                           kind=events_pb2.COMMIT_KIND_ROUTE, route=route, owner=owner)  # fmt: skip
        [event] = await log.append(f"route:{route}", None, [NewEvent(commit, actor=owner)])
        async with log.pool.acquire() as conn, conn.transaction():
            await intake.handle(conn, event)
    sandbox = SandboxConfig(root=home / "verifier" / "sandboxes", isolate=isolation_available(), hidden=(str(home),))
    worker = WorkerConfig(git_dir=home / "repo.git", sandbox=sandbox, slots=(CPU_SLOT,))
    dispatcher = Timed(queue, worker, DispatchConfig(os.environ["SLURM_CONF"], poll_s=poll_s))
    started = time.monotonic()
    task = asyncio.create_task(dispatcher.run())
    while True:
        rows = await queue.search(limit=checks + 10)
        if all(r.state in ("passed", "failed") for r in rows):
            break
        await asyncio.sleep(0.2)
    wall = time.monotonic() - started
    await dispatcher.stop()
    await task
    rows = await queue.search(limit=checks + 10)
    nodes = subprocess.run(["sinfo", "-h", "-N", "-p", "runners", "-o", "%N"], capture_output=True, text=True,
                           check=True).stdout.split()  # fmt: skip
    to_running = sorted(s[0] for s in dispatcher.samples)
    to_completed = sorted(s[1] for s in dispatcher.samples)

    def summary(values):
        p95 = values[int(0.95 * (len(values) - 1))]
        return {"median_s": round(statistics.median(values), 3), "p95_s": round(p95, 3), "max_s": round(values[-1], 3)}

    return {
        "runner_nodes": len(set(nodes)),
        "checks": checks,
        "owners": owners,
        "check_script_sleep_s": sleep_s,
        "dispatcher_poll_s": poll_s,
        "passed": sum(r.state == "passed" for r in rows),
        "wall_s": round(wall, 1),
        "checks_per_hour": round(checks / wall * 3600),
        "dispatched_to_running": summary(to_running),
        "finished_to_completed": summary(to_completed),
        "machine": f"{os.cpu_count()} CPUs, {platform.platform()}, Slurm 22.05 on one host (deploy/local/slurm)",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=24)
    parser.add_argument("--owners", type=int, default=3)
    parser.add_argument("--sleep", type=float, default=2.0)
    parser.add_argument("--poll", type=float, default=1.0)
    args = parser.parse_args()
    configure_logging("bench-runners", level="WARNING")
    print(json.dumps(asyncio.run(measure(args.checks, args.owners, args.sleep, args.poll)), indent=2))


if __name__ == "__main__":
    main()
