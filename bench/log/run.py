"""Benchmark of the event log, the relay and read+decode against the real PostgreSQL and NATS.

    python -m bench.log.run [--repeats 3] [--out bench/log/results.json]

Creates its own database (kb_bench_log_<random>) and JetStream stream and drops them afterwards. Results are
printed as a Markdown table and written as JSON.
"""

import argparse
import asyncio
import json
import os
import platform
import secrets
import sys
import time
from dataclasses import replace
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


class Clock:
    """Wall time, this process's CPU time and the CPU time of the database's PostgreSQL backends over a run.

    The machine's 2 cores are shared with other work, so wall-clock rates swing with its load; CPU microseconds per
    event do not, and say what the code costs on each side."""

    def __init__(self, admin: asyncpg.Connection, database: str):
        self.admin, self.database = admin, database

    async def start(self) -> "Clock":
        self.backends = await self._backend_cpu()
        self.cpu = time.process_time()
        self.wall = time.perf_counter()
        return self

    async def stop(self, events: int) -> dict:
        wall = time.perf_counter() - self.wall
        cpu = time.process_time() - self.cpu
        backends = await self._backend_cpu()
        server = sum(seconds - self.backends.get(pid, 0.0) for pid, seconds in backends.items())
        return {
            "events_per_s": round(events / wall),
            "client_cpu_us_per_event": round(cpu / events * 1e6, 1),
            "postgres_cpu_us_per_event": round(server / events * 1e6, 1),
        }

    async def _backend_cpu(self) -> dict[int, float]:
        pids = await self.admin.fetch("SELECT pid FROM pg_stat_activity WHERE datname = $1", self.database)
        return {r["pid"]: cpu for r in pids if (cpu := _process_cpu(r["pid"])) is not None}


def _process_cpu(pid: int) -> float | None:
    """utime + stime of a process in seconds (Linux /proc), None when it is gone or not ours to read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def append_run(log: EventLog, clock: Clock, total: int, batch: int, writers: int) -> dict:
    """`writers` concurrent appenders, each appending batches of `batch` to its own stream.

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

    await clock.start()
    await asyncio.gather(*[writer(n) for n in range(writers)])
    return await clock.stop(per_writer * writers)


async def read_run(log: EventLog, clock: Clock, batch_size: int) -> dict:
    await clock.start()
    count = 0
    async for event in log.read_all(batch_size=batch_size):
        count += event.global_position > 0
    return await clock.stop(count)


async def relay_run(log: EventLog, clock: Clock, settings: Settings, events: int) -> dict:
    """The relay publishing the last `events` of the log to a fresh stream, until its checkpoint reaches the head."""
    head = await log.head_position()
    await log.pool.execute(
        "INSERT INTO relay_checkpoints (stream, position) VALUES ($1, $2)", settings.events_stream, head - events
    )
    relay = Relay(log, settings, batch_size=1000, poll_interval_s=0.05)
    await clock.start()
    task = asyncio.create_task(relay.run())
    while relay.checkpoint < head:
        await asyncio.sleep(0.01)
    result = await clock.stop(events)
    await relay.stop()
    await task
    return result


async def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.log.run", description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=50_000, help="events per batched-append run")
    parser.add_argument("--single", type=int, default=1_000, help="events per single-event-append run")
    parser.add_argument("--relay-events", type=int, default=20_000, help="events per relay run")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each measurement; the best is reported")
    parser.add_argument("--out", type=Path, default=HERE / "results.json")
    args = parser.parse_args(argv)

    load_before = round(os.getloadavg()[0], 2)
    tag = secrets.token_hex(4)
    database = f"kb_bench_log_{tag}"
    admin = await asyncpg.connect(f"{SERVER_URL}/postgres")
    await admin.execute(f'CREATE DATABASE "{database}"')
    settings = Settings(database_url=f"{SERVER_URL}/{database}", nats_url=NATS_URL)
    relay_streams = [
        replace(settings, events_stream=f"KB_BENCH_LOG_{tag.upper()}_{n}", events_subject_prefix=f"kbbench.{tag}{n}")
        for n in range(args.repeats)
    ]
    runs: dict[str, list[dict]] = {}

    async def measure(name: str, run) -> None:
        runs.setdefault(name, []).append(await run)

    try:
        log = await EventLog.connect(settings.database_url, min_size=2, max_size=8)
        clock = Clock(admin, database)
        try:
            for n in range(args.repeats):
                await measure("append_single_1_writer", append_run(log, clock, args.single, 1, 1))
                await measure("append_single_4_writers", append_run(log, clock, args.single, 1, 4))
                await measure("append_batch1000_1_writer", append_run(log, clock, args.events, 1000, 1))
                await measure("append_batch1000_2_writers", append_run(log, clock, args.events, 1000, 2))
                await measure("read_all_decode_batch1000", read_run(log, clock, 1000))
                await measure("read_all_decode_batch5000", read_run(log, clock, 5000))
                await measure("relay_publish_batch1000", relay_run(log, clock, relay_streams[n], args.relay_events))
            log_size = await log.head_position()
        finally:
            await log.close()
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        await admin.close()
        nc = await bus.connect(settings)
        for relay_settings in relay_streams:
            await bus.delete_stream(nc.jetstream(), relay_settings)
        await nc.close()

    best = {name: max(results, key=lambda r: r["events_per_s"]) for name, results in runs.items()}
    report = {
        "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(["python -m bench.log.run", *(sys.argv[1:] if argv is None else argv)]),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "postgres": await server_version(),
            # Other work on the machine shares its 2 cores: the load average says how much.
            "load_average_1m_before_after": [load_before, round(os.getloadavg()[0], 2)],
        },
        "events_per_run": {"batched": args.events, "single": args.single, "relay": args.relay_events},
        "log_size_at_end": log_size,
        "best_run": best,
        "runs": runs,
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print("| measurement | best events/s | all runs, events/s | client CPU µs/event | PostgreSQL CPU µs/event |")
    print("|---|---:|---|---:|---:|")
    for name, results in runs.items():
        rates = ", ".join(f"{r['events_per_s']:,}" for r in results)
        b = best[name]
        print(
            f"| {name} | {b['events_per_s']:,} | {rates} | {b['client_cpu_us_per_event']} |"
            f" {b['postgres_cpu_us_per_event']} |"
        )
    return report


async def server_version() -> str:
    conn = await asyncpg.connect(f"{SERVER_URL}/postgres")
    try:
        return await conn.fetchval("SHOW server_version")
    finally:
        await conn.close()


if __name__ == "__main__":
    asyncio.run(main())
