"""How long one check of a route takes through the whole verifier on this machine: the route committed to a hosted
repository, its CommitIngested queued by the intake, one CPU worker running checks/verify.sbatch (the real harness,
smoke shapes, TRITON_INTERPRET=1) in the sandbox, the CheckCompleted appended.

    PYTHONPATH=$PWD:$PWD/protos python -m bench.verifier.smoke_check ROUTE_FILES_DIR [--route NAME]

Uses a throwaway database (kb_bench_verifier_<random>) on KB_TEST_POSTGRES_URL (default the local server).
"""

import argparse
import asyncio
import json
import os
import secrets
import shutil
import tempfile
import time
from pathlib import Path

import asyncpg

from services.common.config import Settings
from services.common.eventlog import EventLog
from services.common.logs import configure_logging
from services.verifier.intake import Intake
from services.verifier.queue import CheckQueue
from services.verifier.worker import Worker
from tests.verifier.conftest import CPU_SLOT, HostedRepo, approve_rules, project_rules, push_route, worker_config

SERVER_URL = os.environ.get("KB_TEST_POSTGRES_URL", "postgresql://root@127.0.0.1:5432")


async def measure(route_dir: Path, route: str) -> dict:
    name = f"kb_bench_verifier_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(f"{SERVER_URL}/postgres")
    await admin.execute(f'CREATE DATABASE "{name}"')
    home = Path(tempfile.mkdtemp(prefix="kb_bench_verifier_"))
    try:
        settings = Settings(database_url=f"{SERVER_URL}/{name}", home=home)
        log = await EventLog.connect(settings.database_url)
        try:
            queue = CheckQueue(log)
            repo = HostedRepo(home / "repo.git")
            rules_commit = await approve_rules(log, repo, project_rules())
            files = {p.name: p.read_text() for p in sorted(route_dir.glob("*.py")) if p.name != "__init__.py"}
            await push_route(log, repo, route, files, rules_commit)
            async with log.pool.acquire() as conn:
                async for event in log.read_all():
                    async with conn.transaction():
                        await Intake(log, queue).handle(conn, event)
            started = time.monotonic()
            await Worker(queue, worker_config(settings), CPU_SLOT, name="bench").run_once()
            elapsed = time.monotonic() - started
            [row] = await queue.search()
        finally:
            await log.close()
    finally:
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        await admin.close()
        shutil.rmtree(home, ignore_errors=True)
    result = row.result
    return {
        "route": route,
        "files": sorted(files),
        "state": row.state,
        "reasons": list(result.reasons),
        "score": round(result.score, 4),
        "runner": result.runner,
        "check_duration_s": round(result.duration_s, 1),
        "claim_to_completion_s": round(elapsed, 1),
        "subtasks": {
            s.id: {"passed": s.passed, "submitted": s.submitted, "candidate_ms": round(s.candidate_ms, 1)}
            for s in result.subtasks
        },
        "cpus": os.cpu_count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("route_dir", type=Path)
    parser.add_argument("--route", default="triton")
    args = parser.parse_args()
    configure_logging("bench-verifier", level="WARNING")  # logs on stderr; the result alone on stdout
    print(json.dumps(asyncio.run(measure(args.route_dir, args.route)), indent=2))


if __name__ == "__main__":
    main()
