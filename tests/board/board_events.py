"""Builders of log envelopes for the board's tests: an Event with its position, time and actor filled in."""

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from kernelboard.v1 import events_pb2

from services.common.eventlog import EventLog, NewEvent

RULES_PATH = Path(__file__).resolve().parents[2] / "scienceslack.json"
DAY_NS = 86_400 * 1_000_000_000
START_NS = 1_780_000_000 * 1_000_000_000


def envelope(position: int, payload, *, actor: str = "curator", at_ns: int | None = None, verifier_version=None):
    event = events_pb2.Event(
        event_id=f"00000000-0000-0000-0000-{position:012d}",
        stream="test",
        stream_version=position,
        global_position=position,
        type=type(payload).__name__,
        actor=actor,
    )
    event.occurred_at.FromNanoseconds(START_NS + position * 1_000_000_000 if at_ns is None else at_ns)
    if verifier_version is not None:
        event.verifier_version = verifier_version
    oneof = event.DESCRIPTOR.oneofs_by_name["payload"]
    field = next(f.name for f in oneof.fields if f.message_type == payload.DESCRIPTOR)
    getattr(event, field).CopyFrom(payload)
    return event


def rules_json(version: int, *, verifier_versions=None, status: str | None = None) -> str:
    rules = json.loads(RULES_PATH.read_text())
    rules["benchmark"]["version"] = version
    # None: rules that name no verifier versions (written before the field existed), which accept any.
    if verifier_versions is None:
        rules["benchmark"].pop("verifier_versions", None)
    else:
        rules["benchmark"]["verifier_versions"] = list(verifier_versions)
    if status is not None:
        rules["benchmark"]["status"] = status
    return json.dumps(rules)


def rules(version: int, **kwargs):
    return events_pb2.RulesApproved(
        rules_commit=f"rules{version}", benchmark_version=version, rules_json=rules_json(version, **kwargs)
    )


def check(route: str, version: int, *, passed: bool, score: float, reasons=(), check_id: str = "c", verified=None):
    """A check on the pinned runner: a pass is verified unless ``verified=False`` says otherwise."""
    return events_pb2.CheckCompleted(
        check_id=check_id,
        check_name="verify",
        route=route,
        sha=f"sha-{route}",
        kind=events_pb2.COMMIT_KIND_ROUTE,
        passed=passed,
        reasons=list(reasons),
        score=score,
        cost=1.5,
        benchmark_version=version,
        runner="NVIDIA H200" if verified is not False else "cpu",
        verified=passed if verified is None else verified,
        not_verified_because=[] if verified is not False else ["runner cpu is not the pinned NVIDIA H200"],
    )


def report(route: str, version: int, *, score: float, by_maintainer: bool, reporter: str):
    return events_pb2.MetricsReported(
        route=route,
        sha=f"sha-{route}",
        score=score,
        cost=2.0,
        by_maintainer=by_maintainer,
        reporter=reporter,
        benchmark_version=version,
    )


T0 = datetime(2026, 11, 1, tzinfo=UTC)


def scenario(start_minute: int = 0):
    """(stream, NewEvent) pairs: rules, routes, checks passing and failing, reports, an adoption, a raised version."""
    at = [T0 + timedelta(minutes=start_minute + i) for i in range(20)]
    return [
        ("rules", NewEvent(rules(1, verifier_versions=[1]), actor="curator", occurred_at=at[0])),
        (
            "route:fast",
            NewEvent(
                events_pb2.RouteStarted(route="fast", owner="alice", started_by="alice/a1"),
                actor="alice/a1",
                occurred_at=at[1],
            ),
        ),
        (
            "check:1",
            NewEvent(
                check("fast", 1, passed=True, score=2.0, check_id="1"),
                actor="system:verifier",
                verifier_version=1,
                occurred_at=at[2],
            ),
        ),
        (
            "check:2",
            NewEvent(
                check("slow", 1, passed=False, score=0.0, reasons=["timeout"], check_id="2"),
                actor="system:verifier",
                verifier_version=1,
                occurred_at=at[3],
            ),
        ),
        (
            "route:tiled",
            NewEvent(
                report("tiled", 1, score=3.0, by_maintainer=True, reporter="curator"),
                actor="curator",
                occurred_at=at[4],
            ),
        ),
        (
            "route:naive",
            NewEvent(
                report("naive", 1, score=9.0, by_maintainer=False, reporter="bob"), actor="bob", occurred_at=at[5]
            ),
        ),
        (
            "benchmark:1",
            NewEvent(
                events_pb2.RouteAdopted(route="fast", benchmark_version=1, adopted=True),
                actor="curator",
                occurred_at=at[6],
            ),
        ),
        (
            "check:3",
            NewEvent(
                check("fast", 1, passed=True, score=2.5, check_id="3"),
                actor="system:verifier",
                verifier_version=1,
                occurred_at=at[7],
            ),
        ),
        ("rules", NewEvent(rules(2), actor="curator", occurred_at=at[8])),
        (
            "check:4",
            NewEvent(
                check("fast", 2, passed=True, score=1.2, check_id="4"),
                actor="system:verifier",
                verifier_version=1,
                occurred_at=at[9],
            ),
        ),
    ]


async def append_all(log: EventLog, items) -> list[events_pb2.Event]:
    appended = []
    for stream, new in items:
        appended += await log.append(stream, None, [new])
    return appended
