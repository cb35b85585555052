"""A verifier process killed -9 in the middle of a check: its check dies with it, its lease expires, another worker
runs the check again and it is completed exactly once."""

import asyncio
import os
import signal
import subprocess
import sys

from services.verifier.intake import Intake
from services.verifier.worker import Worker
from tests.verifier.conftest import (
    CPU_SLOT,
    REPO,
    approve_rules,
    metrics_script,
    push_route,
    route_name,
    rules_with_checks,
    worker_config,
)

SLOW = {"name": "slow", "script": "checks/slow.sh", "metrics": "slow.json", "time_limit_s": 120}
MARKER = "sleep 15.789"  # far longer than the 5 s the test waits for it to die with its worker


def worker_process(settings, lease_s: float) -> subprocess.Popen:
    env = {
        **os.environ,
        "PYTHONPATH": f"{REPO}:{REPO / 'protos'}",
        "KB_DATABASE_URL": settings.database_url,
        "KB_HOME": str(settings.home),
        "KB_VERIFIER_DEVICE": "cpu",
        "KB_VERIFIER_LEASE_S": str(lease_s),
        "KB_VERIFIER_POLL_S": "0.2",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "services.verifier.worker"],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def processes_with(marker: str) -> list[str]:
    done = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    return done.stdout.split()


async def test_a_worker_killed_mid_check_loses_nothing_and_counts_nothing_twice(log, settings, queue, repo):
    rules_commit = await approve_rules(
        log, repo, rules_with_checks(SLOW), extra={"checks/slow.sh": metrics_script(MARKER)}
    )
    await push_route(log, repo, route_name(), {"new_gelu.py": ""}, rules_commit)
    async with log.pool.acquire() as conn:
        async for event in log.read_all(types={"RulesApproved", "CommitIngested"}):
            async with conn.transaction():
                await Intake(log, queue).handle(conn, event)

    doomed = worker_process(settings, lease_s=2)
    try:
        async with asyncio.timeout(60):
            while not (running := [r for r in await queue.search() if r.state == "running"]):
                assert doomed.poll() is None, doomed.stderr.read().decode()
                await asyncio.sleep(0.1)
            while not processes_with(MARKER):  # the check's script is running in its sandbox
                await asyncio.sleep(0.1)
    finally:
        doomed.send_signal(signal.SIGKILL)
        doomed.wait()
    [claimed] = running
    assert claimed.claimed_by.endswith(f":{doomed.pid}:cpu")

    async with asyncio.timeout(5):
        while processes_with(MARKER):  # the sandbox died with its worker
            await asyncio.sleep(0.1)
    assert (await queue.get(claimed.item.check_id)).state == "running"  # until its lease runs out

    rescuer = Worker(queue, worker_config(settings), CPU_SLOT, name="rescuer")
    task = asyncio.create_task(rescuer.run())
    try:
        async with asyncio.timeout(60):
            while (row := await queue.get(claimed.item.check_id)).state not in ("passed", "failed"):
                await asyncio.sleep(0.2)
    finally:
        await rescuer.stop()
        await task
    assert row.state == "passed" and row.attempts == 2 and row.result.verifier_host == "rescuer"
    events = await log.read_stream(f"check:{claimed.item.check_id}")
    assert [e.type for e in events] == ["CheckRequested", "CheckCompleted"]
