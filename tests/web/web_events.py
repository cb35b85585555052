"""The log the web tests serve: two boards, a verified route with per-problem results, a failed check, a passed check
that is not verified (a CPU profile's) and a report listed beside, and text from outside that carries markup (a
route's name, a check's reasons, a violation)."""

import json
from datetime import UTC, datetime, timedelta

from kernelboard.v1 import events_pb2

from services.common.eventlog import NewEvent
from tests.board.board_events import RULES_PATH, rules

PROBLEMS = json.loads(RULES_PATH.read_text())["benchmark"]["kernels"]
HOSTILE_ROUTE = "<script>alert('route')</script>"
HOSTILE_REASON = "<img src=x onerror=alert('reason')> broke a guardrail"
HOSTILE_VIOLATION = "<b>bold</b><script>alert('violation')</script>"
T0 = datetime(2026, 11, 20, tzinfo=UTC)


def subtasks(speedup: float, *, violation: str = "") -> list[events_pb2.Subtask]:
    """Twelve problems: speed-ups around ``speedup``, the floor twice as far, one problem left to eager."""
    out = []
    for index, problem in enumerate(PROBLEMS):
        submitted = problem != "hinge_loss"
        value = speedup * (0.6 + 0.08 * index) if submitted else 1.0
        out.append(
            events_pb2.Subtask(
                id=problem,
                passed=not (violation and index == 0),
                submitted=submitted,
                speedup=value,
                reference_ms=2.0 + index,
                candidate_ms=(2.0 + index) / value,
                max_abs_error=1e-6 * (index + 1),
                error_ratio=1.0 + index / 100,
                floor_fraction=0.5 if submitted else 0.0,
                violations=[violation] if violation and index == 0 else [],
            )
        )
    return out


NOT_JUDGED = "CUDA error: out of memory in the judge"
CPU_PROFILE = "CPU profile: correctness and guardrails checked, times from a host timer"


def check(
    route: str,
    version: int,
    score: float,
    *,
    check_id: str,
    passed=True,
    reasons=(),
    violation="",
    on_cpu=False,
    interval=(0.0, 0.0),
    not_judged="",
):
    """A check as the verifier records it: on the pinned runner at full shapes, verified when it passed; ``on_cpu``,
    the CPU profile's, which passes without being verified; ``interval``, the score's noise interval; ``not_judged``,
    the judge's failure on the first problem (an incomplete check)."""
    completed = events_pb2.CheckCompleted(
        check_id=check_id,
        check_name="verify",
        route=route,
        sha=f"{check_id:0>8}" + "ab" * 16,
        kind=events_pb2.COMMIT_KIND_ROUTE,
        passed=passed,
        reasons=list(reasons),
        score=score,
        cost=12.5,
        subtasks=subtasks(score or 0.8, violation=violation),  # a failed check's score is 0
        benchmark_version=version,
        runner="cpu" if on_cpu else "NVIDIA H200",
        verified=passed and not on_cpu,
        not_verified_because=[CPU_PROFILE] if on_cpu else [],
        score_low=interval[0],
        score_high=interval[1],
        incomplete=bool(not_judged),
        torch_version="2.13.0+cpu" if on_cpu else "2.11.0+cu130",
        rules_commit="b93c155f" * 5,
    )
    if not_judged:
        completed.subtasks[0].not_judged = not_judged
        completed.subtasks[0].passed = False
    return completed


def at(minute: int) -> datetime:
    return T0 + timedelta(minutes=minute)


def started(route: str, owner: str, minute: int):
    return (
        f"route:{route}",
        NewEvent(
            events_pb2.RouteStarted(route=route, owner=owner, started_by=f"{owner}/a1"),
            actor=f"{owner}/a1",
            occurred_at=at(minute),
        ),
    )


def checked(route: str, version: int, score: float, minute: int, **kwargs):
    return (
        f"check:{kwargs['check_id']}",
        NewEvent(
            check(route, version, score, **kwargs), actor="system:verifier", verifier_version=1, occurred_at=at(minute)
        ),
    )


def seeded():
    """(stream, NewEvent) pairs: board 1 with one verified route, then board 2 (the newest) with the rest."""
    return [
        ("rules", NewEvent(rules(1, verifier_versions=[1]), actor="curator", occurred_at=at(0))),
        started("old", "carol", 1),
        checked("old", 1, 1.7, 2, check_id="101", interval=(1.65, 1.75)),
        ("rules", NewEvent(rules(2, verifier_versions=[1]), actor="curator", occurred_at=at(3))),
        started("fast", "alice", 4),
        checked("fast", 2, 2.0, 5, check_id="201"),
        checked("fast", 2, 2.5, 6, check_id="202"),
        # A route name the grammar refuses today, in the log from before: the board lists it, as text.
        started(HOSTILE_ROUTE, "mallory", 7),
        checked(HOSTILE_ROUTE, 2, 0.0, 8, check_id="203", passed=False, reasons=[HOSTILE_REASON]),
        # A route of a good name whose check carries markup in its reasons and a violation.
        started("markup", "mallory", 8),
        checked(
            "markup", 2, 0.0, 8, check_id="206", passed=False, reasons=[HOSTILE_REASON], violation=HOSTILE_VIOLATION
        ),
        started("smoke", "dave", 8),
        checked("smoke", 2, 0.004, 8, check_id="207", on_cpu=True),
        # A check the judge could not finish: one problem not judged (the judge's own failure, not the route's).
        started("halfway", "erin", 8),
        checked("halfway", 2, 0.0, 8, check_id="208", passed=False, not_judged=NOT_JUDGED),
        (
            "route:tiled",
            NewEvent(
                events_pb2.MetricsReported(
                    route="tiled",
                    sha="c" * 40,
                    score=3.3,
                    cost=2.0,
                    by_maintainer=False,
                    reporter="bob",
                    benchmark_version=2,
                ),
                actor="bob",
                occurred_at=at(9),
            ),
        ),
    ]
