"""What a folded board shows: each route's place (ranked, with ties where intervals overlap, or listed beside),
each problem's leader, a route's history records, the board's status and header. Pure functions over the state that
projection.py folds; the rules they apply are stated in projection.py's docstring ("Board rules"), the one account of
them, and nothing here reads the log or a clock.
"""

import math
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from kernelboard.v1 import events_pb2

from services.board.projection import AT_WORK_WITHIN_NS, DISQUALIFIED, QUIET_AFTER_NS
from services.board.state import (
    ACTIVE,
    COUNTED,
    NOT_ACCEPTED,
    NOT_FINITE,
    NOT_VERIFIED,
    QUIET,
    Board,
    Entry,
    Record,
    RouteOnBoard,
    State,
)


def history_record(board: Board, code: int, event: events_pb2.Event) -> Record:
    """A history entry from its event (read back from the log) and what the fold decided of it."""
    at = event.occurred_at
    ns = at.seconds * 1_000_000_000 + at.nanos
    kind = event.WhichOneof("payload")
    note = ""
    if code == NOT_FINITE:
        note = "the score is not a finite number"
    elif code == NOT_VERIFIED:
        note = "passed, not verified: " + "; ".join(event.check_completed.not_verified_because)
    elif code == NOT_ACCEPTED:
        version = event.verifier_version
        judged_by = f"verifier version {version}" if version else "a check without a verifier version"
        accepted = ", ".join(map(str, board.card.verifier_versions)) if board.card else ""
        note = f"{judged_by} is not accepted by the rules (they accept {accepted})"
    counted = code == COUNTED
    if kind == "check_completed":
        c = event.check_completed
        return Record(
            event.global_position,
            ns,
            "check",
            c.sha,
            c.score,
            c.cost,
            c.passed,
            tuple(c.reasons),
            event.verifier_version,
            counted,
            note,
            c.check_id,
            "",
            False,
        )
    if kind == "metrics_reported":
        m = event.metrics_reported
        return Record(
            event.global_position,
            ns,
            "report",
            m.sha,
            m.score,
            m.cost,
            False,
            (),
            0,
            counted,
            note,
            "",
            m.reporter or event.actor,
            m.by_maintainer,
        )
    if kind == "check_disqualified":
        d = event.check_disqualified
        kind = "disqualified" if d.disqualified else "reinstated"
        by = event.actor  # the maintainer, shown as the record's reporter
        position = event.global_position
        return Record(position, ns, kind, d.sha, 0.0, 0.0, False, (), 0, counted, d.reason, d.check_id, by, False)
    a = event.route_adopted
    kind = "adopted" if a.adopted else "unadopted"
    return Record(event.global_position, ns, kind, "", 0.0, 0.0, False, (), 0, counted, a.note, "", "", False)


class Placed(NamedTuple):
    """A ranked row: the route, its entry, its place (the first position of it, from 1) and whether it shares it."""

    route: str
    entry: Entry
    rank: int
    tied: bool


def interval(entry: Entry) -> tuple[float, float]:
    """The entry's score interval; the score alone when it has none."""
    if entry.score_low == entry.score_high == 0.0:
        return entry.score, entry.score
    return entry.score_low, entry.score_high


def ranked(board: Board) -> list[Placed]:
    """The ranked rows in order (higher score first, then the earlier log position), each with its place: rows whose
    intervals overlap share one, so that no two routes are ordered by noise."""
    rows = []
    for route, on_board in board.routes.items():
        if on_board.verified is not None:
            rows.append((route, on_board.verified))
        if on_board.by_maintainer is not None:
            rows.append((route, on_board.by_maintainer))
    rows.sort(key=lambda row: (-row[1].score, row[1].position))
    starts = place_starts([interval(entry) for _, entry in rows])
    placed = []
    for index, (route, entry) in enumerate(rows):
        start = starts[index]
        tied = start != index or (index + 1 < len(rows) and starts[index + 1] == start)
        placed.append(Placed(route, entry, start + 1, tied))
    return placed


class Leader(NamedTuple):
    problem: str
    route: str  # "" while no verified check measured it
    entry: Entry | None
    speedup: float


def standing_passes(board: Board) -> list[tuple[str, Entry]]:
    """Every verified check on the board that is not disqualified: the checks that may lead a problem."""
    return [
        (route, placed)
        for route, on_board in board.routes.items()
        for placed in on_board.passes
        if placed.check_id not in on_board.disqualified
    ]


def check_speedups(check: events_pb2.CheckCompleted) -> tuple[tuple[str, float], ...]:
    """(problem, speed-up) of each problem a verified check submitted (it passed them all, each judged)."""
    return tuple([(s.id, s.speedup) for s in check.subtasks if s.submitted])


def problem_leaders(board: Board, speedups: Mapping[int, Iterable[tuple[str, float]]]) -> list[Leader]:
    """Each problem's best verified speed-up across the board's routes (the rules' problems in their order; a board
    without readable rules: those its checks measured), the route and check that hold it, the earlier on a tie.
    ``speedups``: each standing check's problems by its log position (check_speedups of its event)."""
    best: dict[str, Leader] = {}
    for route, placed in standing_passes(board):
        for problem, speedup in speedups.get(placed.position, ()):
            if not (math.isfinite(speedup) and speedup > 0):
                continue
            held = best.get(problem)
            if held is None or (speedup, -placed.position) > (held.speedup, -held.entry.position):
                best[problem] = Leader(problem, route, placed, speedup)
    order = list(board.card.kernels) if board.card is not None and board.card.kernels else sorted(best)
    return [best.get(problem) or Leader(problem, "", None, 0.0) for problem in order]


def place_starts(intervals: list[tuple[float, float]]) -> list[int]:
    """For intervals in descending score order, the index where each one's place starts. Row j overlaps an earlier
    row i exactly when low_i <= high_j (high_i >= score_i >= score_j >= low_j holds already), so the earliest row it
    overlaps is found by bisecting the running minimum of the lows; every row between the two shares their place."""
    count = len(intervals)
    running_min: list[float] = []  # non-increasing: min(low_0 .. low_k)
    joins = [0] * (count + 1)  # +1 where a run of rows joined to their predecessor begins, -1 after it ends
    for j, (low, high) in enumerate(intervals):
        # the first i whose running minimum is <= high: a bisection over a non-increasing list
        first, last = 0, j
        while first < last:
            middle = (first + last) // 2
            if running_min[middle] <= high:
                last = middle
            else:
                first = middle + 1
        if first < j:  # rows first+1 .. j each share a place with the row before
            joins[first + 1] += 1
            joins[j + 1] -= 1
        running_min.append(low if not running_min else min(running_min[-1], low))
    starts, covering, start = [], 0, 0
    for j in range(count):
        covering += joins[j]
        if not covering:
            start = j
        starts.append(start)
    return starts


def listed_beside(board: Board) -> list[tuple[str, Entry]]:
    """Others' reported scores (higher first, then earlier), then each route's latest check that did not count: a
    failed check, or a pass that is not verified; then every disqualified check (in log order), as evidence."""
    reported, failed, disqualified = [], [], []
    for route, on_board in board.routes.items():
        if on_board.reported is not None:
            reported.append((route, on_board.reported))
        if on_board.failed is not None:
            failed.append((route, on_board.failed))
        if on_board.disqualified:
            disqualified += [(route, entry) for entry in disqualified_passes(on_board)]
    reported.sort(key=lambda row: (-row[1].score, row[1].position))
    failed.sort(key=lambda row: row[1].position)
    disqualified.sort(key=lambda row: row[1].position)
    return reported + failed + disqualified


def disqualified_passes(on_board: RouteOnBoard) -> list[Entry]:
    """The route's disqualified verified checks, each marked: source "disqualified", the maintainer as its reporter
    and the maintainer's reason as its reason."""
    marked = []
    for placed in on_board.passes:
        verdict = on_board.disqualified.get(placed.check_id)
        if verdict is not None:
            marked.append(placed._replace(source=DISQUALIFIED, reporter=verdict[0], reason=verdict[1]))
    return marked


def find_pass(state: State, check_id: str) -> tuple[int, str, Entry] | None:
    """(board version, route, entry) of the verified check ``check_id``, on whichever board it is; None if none."""
    for version, board in state.boards.items():
        for route, on_board in board.routes.items():
            for placed in on_board.passes:
                if placed.check_id == check_id:
                    return version, route, placed
    return None


def status(board: Board, now_ns: int) -> str:
    if board.status != ACTIVE:
        return board.status
    since = board.last_scored_ns or board.started_ns
    return QUIET if now_ns - since >= QUIET_AFTER_NS else ACTIVE


def status_reason(board: Board, now_ns: int) -> str:
    shown = status(board, now_ns)
    if shown == QUIET:
        return "no route scored for 14 days" if board.last_scored_ns else "no route scored in 14 days since it started"
    return board.status_reason if shown != ACTIVE else ""


class Header(NamedTuple):
    agents_at_work: int
    agents_in_all: int
    routes: int
    last_active_ns: int
    started_ns: int


def header(state: State, board: Board) -> Header:
    agents = state.agents
    since = state.now_ns - AT_WORK_WITHIN_NS
    in_all = at_work = 0
    for actor, last_ns in board.actors.items():
        if actor in agents:
            in_all += 1
            if last_ns >= since:
                at_work += 1
    return Header(at_work, in_all, len(board.routes), board.last_active_ns, board.started_ns)


def newest_version(state: State) -> int:
    return max(state.boards, default=0)
