"""Benchmark of the event log, the relay and read+decode against the real PostgreSQL and NATS.

    python -m bench.log.run [--events 100000] [--out bench/log/results.json]

Creates its own database (kb_bench_log_<random>) and JetStream stream and drops them afterwards. Results are
printed as a Markdown table and written as JSON.
"""

import argparse
import asyncio
import json
import os
import platform
import secrets
import time
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
from kernelboard.v1 import events_pb2 as pb

from services.common import bus
from services.common.config import Settings
from services.common.eventlog import EventLog, NewEvent
from services.common.relay import Relay

SERVER_URL = os.environ.get("KB_BENCH_POSTGRES_URL", "postgresql://root@127.0.0.1:5432")
NATS_URL = os.environ.get("KB_NATS_URL", "nats://127.0.0.1:4222")
HERE = Path(__file__).resolve().parent


def commit_event(i: int) -> NewEvent:
    """A typical event: a route push, ~200 bytes of payload."""
    payload = pb.CommitIngested(
        ref="refs/heads/routes/fast",
        sha=f"{i:040x}",
        parent=f"{i + 1:040x}",
        kind=pb.COMMIT_KIND_ROUTE,
        route="fast",
        changed_paths=["routes/fast/matmul.py", "routes/fast/metrics.json"],
        owner="alice",
    )
    return NewEvent(payload, actor="alice/agent-1")


async def append_rate(log: EventLog, total: int, batch: int, writers: int) -> float:
    """Events/s for `writers` concurrent appenders, each appending batches of `batch` to its own stream.

    The events (their payload messages) are built before the clock starts: this measures the log, not protobuf
    construction in the caller."""
    per_writer = total // writers
    batches = [
        [[commit_event(start + i) for i in range(batch)] for start in range(0, per_writer, batch)]
        for _ in range(writers)
    ]

    async def writer(n: int):
        for events in batches[n]:
            await log.append(f"route:bench-{batch}-{n}", None, events)

    started = time.perf_counter()
    await asyncio.gather(*[writer(n) for n in range(writers)])
    return per_writer * writers / (time.perf_counter() - started)


async def read_rate(log: EventLog, batch_size: int) -> tuple[float, int]:
    started = time.perf_counter()
    count = 0
    async for event in log.read_all(batch_size=batch_size):
        count += event.global_position > 0
    return count / (time.perf_counter() - started), count


async def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000, help="events for the batched append and the reads")
    parser.add_argument("--single", type=int, default=2_000, help="single-event appends")
    parser.add_argument("--relay-events", type=int, default=50_000)
    parser.add_argument("--out", type=Path, default=HERE / "results.json")
    args = parser.parse_args(argv)

    load_before = round(os.getloadavg()[0], 2)
    tag = secrets.token_hex(4)
    database = f"kb_bench_log_{tag}"
    admin = await asyncpg.connect(f"{SERVER_URL}/postgres")
    await admin.execute(f'CREATE DATABASE "{database}"')
    settings = Settings(
        database_url=f"{SERVER_URL}/{database}",
        nats_url=NATS_URL,
        events_stream=f"KB_BENCH_LOG_{tag.upper()}",
        events_subject_prefix=f"kbbench.log{tag}",
    )
    results = {}
    try:
        log = await EventLog.connect(settings.database_url, min_size=2, max_size=8)
        try:
            results["append_single_1_writer"] = await append_rate(log, args.single, 1, 1)
            results["append_single_4_writers"] = await append_rate(log, args.single, 1, 4)
            results["append_batch1000_1_writer"] = await append_rate(log, args.events, 1000, 1)
            results["append_batch1000_2_writers"] = await append_rate(log, args.events, 1000, 2)
            results["read_all_decode_batch1000"], read_count = await read_rate(log, 1000)
            results["read_all_decode_batch5000"], _ = await read_rate(log, 5000)
            # The relay publishes the log from position 1; bound the run by the log size.
            relay_log_events = await log.head_position()
            relay_settings = settings
            if relay_log_events > args.relay_events:
                # Publish only the last relay_events: start the checkpoint there.
                await log.pool.execute(
                    "INSERT INTO relay_checkpoints (stream, position) VALUES ($1, $2)",
                    settings.events_stream,
                    relay_log_events - args.relay_events,
                )
            started = time.perf_counter()
            relay = Relay(log, relay_settings, batch_size=1000, poll_interval_s=0.05)
            task = asyncio.create_task(relay.run())
            while relay.checkpoint < relay_log_events:
                await asyncio.sleep(0.01)
            results["relay_publish_batch1000"] = args.relay_events / (time.perf_counter() - started)
            await relay.stop()
            await task
        finally:
            await log.close()
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        await admin.close()
        nc = await bus.connect(settings)
        await bus.delete_stream(nc.jetstream(), settings)
        await nc.close()

    postgres_version = await server_version()
    report = {
        "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "python -m bench.log.run " + " ".join(argv or []),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "postgres": postgres_version,
            # Other work on the machine shares its 2 cores: the load average says how much.
            "load_average_1m_before_after": [load_before, round(os.getloadavg()[0], 2)],
        },
        "events": {
            "batched_and_read": args.events,
            "single": args.single,
            "relay": args.relay_events,
            "log_size_when_read": read_count,
        },
        "events_per_second": {k: round(v) for k, v in results.items()},
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print("| measurement | events/s |\n|---|---:|")
    for name, rate in report["events_per_second"].items():
        print(f"| {name} | {rate:,} |")
    return report


async def server_version() -> str:
    conn = await asyncpg.connect(f"{SERVER_URL}/postgres")
    try:
        return await conn.fetchval("SHOW server_version")
    finally:
        await conn.close()


if __name__ == "__main__":
    asyncio.run(main())
