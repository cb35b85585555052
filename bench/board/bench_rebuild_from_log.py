"""Rebuild end to end from the real log: read from PostgreSQL, decode, fold (Projector.rebuild), then store.

    PYTHONPATH=$PWD:$PWD/protos .venv/bin/python bench/board/bench_rebuild_from_log.py [--events 1000000]

A scratch database (dropped afterwards) is filled with the generated log (eventgen.py) through EventLog.append, in
batches. Then: the board's Rebuild (read_all in batches of 5,000, one protobuf parse per event, the fold, the swap)
and, separately, writing the rebuilt projection to its tables (what the next event's transaction does after a
rebuild, and what a first start does). Prints one JSON line.

With ``--quiet-lock /work/quiet.lock`` (the shared machine's protocol) the filling holds that lock shared, as other
heavy work does, and only the timed part (rebuild, store, load) holds it exclusively: filling a million events takes
minutes, longer than an exclusive hold should last.
"""

import argparse
import asyncio
import fcntl
import json
import os
import secrets
import sys
import time
from contextlib import contextmanager
from datetime import UTC
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent))

import eventgen  # noqa: E402

from services.board import store  # noqa: E402
from services.board.projector import Projector  # noqa: E402
from services.common.eventlog import EventLog, NewEvent, payload_of  # noqa: E402

ADMIN_URL = os.environ.get("KB_TEST_ADMIN_URL", "postgresql://root@127.0.0.1:5432/postgres")


async def fill(log: EventLog, count: int) -> None:
    batch = []
    for event in eventgen.generate(count):
        vv = event.verifier_version if event.HasField("verifier_version") else None
        at = event.occurred_at.ToDatetime().replace(tzinfo=UTC)
        batch.append(NewEvent(payload_of(event), actor=event.actor, verifier_version=vv, occurred_at=at))
        if len(batch) == 2000:
            await log.append("bench", None, batch)
            batch = []
    if batch:
        await log.append("bench", None, batch)


@contextmanager
def holding(lock_path: str | None, mode: int):
    """flock(2) on lock_path (fcntl.LOCK_SH or LOCK_EX), as flock(1) takes it; no path: no lock."""
    if lock_path is None:
        yield
        return
    with open(lock_path, "a") as lock_file:
        fcntl.flock(lock_file, mode)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--quiet-lock", help="lock file: shared while filling, exclusive while timing")
    args = parser.parse_args()
    name = f"kb_bench_board_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(ADMIN_URL)
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        log = await EventLog.connect(ADMIN_URL.rsplit("/", 1)[0] + f"/{name}")
        with holding(args.quiet_lock, fcntl.LOCK_SH):
            started = time.perf_counter()
            await fill(log, args.events)
            fill_s = time.perf_counter() - started

        with holding(args.quiet_lock, fcntl.LOCK_EX):
            load_before = os.getloadavg()[0]
            projector = Projector(log)
            reply = await projector.rebuild()
            started = time.perf_counter()
            async with log.pool.acquire() as conn, conn.transaction():
                await store.replace(conn, projector.state)
            store_s = time.perf_counter() - started
            started = time.perf_counter()
            async with log.pool.acquire() as conn:
                loaded = await store.load(conn)
            load_s = time.perf_counter() - started
            load_after = os.getloadavg()[0]
        assert loaded.position == projector.state.position == args.events
        await log.close()
        print(
            json.dumps(
                {
                    "benchmark": "board rebuild from the log",
                    "events": reply.events,
                    "rebuild_s": round(reply.seconds, 3),
                    "rebuild_events_per_s": round(reply.events / reply.seconds),
                    "store_all_rows_s": round(store_s, 3),
                    "load_stored_s": round(load_s, 3),
                    "fill_log_s": round(fill_s, 1),
                    "cpus": os.cpu_count(),
                    "load_average_1m_before": round(load_before, 2),
                    "load_average_1m_after": round(load_after, 2),
                }
            )
        )
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


if __name__ == "__main__":
    asyncio.run(main())
