"""What deploy/local/stack.py asks of the running stack, run under the venv's Python (it needs grpcio and asyncpg).

probes.py health --deadline S NAME=HOST:PORT[:PID][@SERVICE] ...
    Waits until each target's grpc.health.v1 Check says SERVING; one JSON line per target; exit 1 if any is not.
    With a PID, a process that has exited fails at once instead of waiting out the deadline.
probes.py ensure-db URL             creates the database of URL when it does not exist
probes.py route-checked ROUTE --deadline S [--watch NAME=PID ...]
    Waits until the event log holds the CheckCompleted of ROUTE's head (its latest ingested commit: the seed's last,
    checked on the newest board); prints it as JSON. A watched process that exits fails at once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import urllib.parse
from dataclasses import dataclass


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


@dataclass(frozen=True)
class HealthTarget:
    name: str
    address: str
    pid: int | None
    service: str

    @classmethod
    def parse(cls, spec: str) -> HealthTarget:
        """``NAME=HOST:PORT[:PID][@SERVICE]``; SERVICE defaults to ``kernelboard.v1.<Name>``."""
        name, _, rest = spec.partition("=")
        if not name or not rest:
            raise ValueError(f"bad health target {spec!r}: expected NAME=HOST:PORT[:PID][@SERVICE]")
        rest, _, service = rest.partition("@")
        parts = rest.split(":")
        if len(parts) not in (2, 3) or not parts[1].isdigit():
            raise ValueError(f"bad health target {spec!r}: expected NAME=HOST:PORT[:PID][@SERVICE]")
        pid = int(parts[2]) if len(parts) == 3 else None
        return cls(name, f"{parts[0]}:{parts[1]}", pid, service or f"kernelboard.v1.{name.capitalize()}")


def check_health(targets: list[HealthTarget], deadline_s: float, interval_s: float = 0.25) -> list[dict]:
    """Poll every target until SERVING, its process exits, or the deadline passes."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    start = time.monotonic()
    results: dict[str, dict] = {}
    channels = {t.name: grpc.insecure_channel(t.address) for t in targets}
    last_seen = {t.name: "no answer yet" for t in targets}
    try:
        while len(results) < len(targets):
            for target in targets:
                if target.name in results:
                    continue
                elapsed = time.monotonic() - start
                if target.pid is not None and not pid_alive(target.pid):
                    results[target.name] = result(target, "EXITED", f"process {target.pid} exited", elapsed)
                    continue
                stub = health_pb2_grpc.HealthStub(channels[target.name])
                try:
                    reply = stub.Check(health_pb2.HealthCheckRequest(service=target.service), timeout=1.0)
                    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
                    if reply.status == health_pb2.HealthCheckResponse.SERVING:
                        results[target.name] = result(target, "SERVING", "", elapsed)
                        continue
                    last_seen[target.name] = f"health status {status}"
                except grpc.RpcError as err:
                    last_seen[target.name] = f"{err.code().name}: {err.details()}"
                if elapsed > deadline_s:
                    detail = f"not SERVING after {deadline_s:.0f} s; last answer: {last_seen[target.name]}"
                    results[target.name] = result(target, "TIMEOUT", detail, elapsed)
            if len(results) < len(targets):
                time.sleep(interval_s)
    finally:
        for channel in channels.values():
            channel.close()
    return [results[t.name] for t in targets]


def result(target: HealthTarget, status: str, detail: str, elapsed: float) -> dict:
    return {
        "name": target.name,
        "target": target.address,
        "service": target.service,
        "status": status,
        "detail": detail,
        "seconds": round(elapsed, 2),
    }


def with_database(url: str, database: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(path=f"/{database}"))


async def ensure_database(url: str) -> str:
    import asyncpg

    name = urllib.parse.urlsplit(url).path.lstrip("/")
    if not name:
        raise SystemExit(f"no database name in {url}")
    conn = await asyncpg.connect(with_database(url, "postgres"), timeout=10)
    try:
        if await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
            return f"database {name} exists"
        quoted = '"' + name.replace('"', '""') + '"'
        try:
            await conn.execute(f"CREATE DATABASE {quoted}")
        except asyncpg.DuplicateDatabaseError:
            return f"database {name} exists (created by another process meanwhile)"
        return f"created database {name}"
    finally:
        await conn.close()


async def wait_route_checked(url: str, route: str, deadline_s: float, watch: dict[str, int]) -> dict:
    from contracts import names
    from services.common.eventlog import EventLog

    log = await EventLog.connect(url, migrate=False)
    start = time.monotonic()
    next_note = 30.0
    position, found, head = 0, None, ""
    branch = names.route_ref(route)
    checked: dict[str, object] = {}  # sha -> its latest CheckCompleted
    try:
        while True:
            async for event in log.read_all(position, types={"CommitIngested", "CheckCompleted"}):
                position = event.global_position
                if event.HasField("commit_ingested") and event.commit_ingested.ref == branch:
                    head = event.commit_ingested.sha
                elif event.HasField("check_completed") and event.check_completed.route == route:
                    checked[event.check_completed.sha] = event
            found = checked.get(head)
            if found is not None:
                done = found.check_completed
                return {
                    "check_id": done.check_id,
                    "sha": done.sha,
                    "passed": done.passed,
                    "reasons": list(done.reasons),
                    "score": done.score,
                    "cost": done.cost,
                    "runner": done.runner,
                    "verified": done.verified,
                    "not_verified_because": list(done.not_verified_because),
                    "duration_s": done.duration_s,
                    "benchmark_version": done.benchmark_version,
                    "global_position": found.global_position,
                }
            elapsed = time.monotonic() - start
            dead = [f"{name} (pid {pid})" for name, pid in watch.items() if not pid_alive(pid)]
            if dead:
                raise SystemExit(f"no check of route {route} yet and {', '.join(dead)} exited")
            if elapsed > deadline_s:
                raise SystemExit(
                    f"no CheckCompleted for route {route} in the event log after {deadline_s:.0f} s"
                    + (f" (its head {head[:12]} not checked yet)" if head else "")
                )
            if elapsed > next_note:
                print(
                    f"    still waiting for the check of route {route} ({elapsed:.0f} s)", file=sys.stderr, flush=True
                )
                next_note += 30
            await asyncio.sleep(1.0)
    finally:
        await log.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="probes.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    health = sub.add_parser("health")
    health.add_argument("--deadline", type=float, required=True)
    health.add_argument("targets", nargs="+")
    sub.add_parser("ensure-db").add_argument("url")
    checked = sub.add_parser("route-checked")
    checked.add_argument("route")
    checked.add_argument("--deadline", type=float, required=True)
    checked.add_argument("--watch", action="append", default=[], help="NAME=PID of a process that must stay alive")
    checked.add_argument("--database-url", default=os.environ.get("KB_DATABASE_URL"))
    args = parser.parse_args(argv)

    if args.command == "health":
        try:
            targets = [HealthTarget.parse(spec) for spec in args.targets]
        except ValueError as err:
            parser.error(str(err))
        results = check_health(targets, args.deadline)
        for line in results:
            print(json.dumps(line), flush=True)
        return 0 if all(r["status"] == "SERVING" for r in results) else 1
    if args.command == "ensure-db":
        print(asyncio.run(ensure_database(args.url)))
        return 0
    if not args.database_url:
        parser.error("route-checked needs --database-url or KB_DATABASE_URL")
    watch = {}
    for spec in args.watch:
        name, _, pid = spec.partition("=")
        if not pid.isdigit():
            parser.error(f"bad --watch {spec!r}: expected NAME=PID")
        watch[name] = int(pid)
    print(json.dumps(asyncio.run(wait_route_checked(args.database_url, args.route, args.deadline, watch))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
