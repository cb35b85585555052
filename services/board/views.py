"""The projection's state as the Board API's messages, and their canonical bytes. projection.py decides; this maps."""

from google.protobuf.timestamp_pb2 import Timestamp
from kernelboard.v1 import board_pb2, events_pb2

from services.board import standing
from services.board.state import Board, Entry, State

HISTORY_SHOWN = 100  # history entries per board in a route's view, the latest


def rfc3339(ns: int) -> str:
    if not ns:
        return ""
    stamp = Timestamp()
    stamp.FromNanoseconds(ns)
    return stamp.ToJsonString()


def canonical(message) -> bytes:
    """Deterministic protobuf bytes: the same view always serializes to the same bytes."""
    return message.SerializeToString(deterministic=True)


def entry(route: str, row: Entry, *, rank: int, owner: str, adopted: bool, tied: bool = False) -> board_pb2.BoardEntry:
    return board_pb2.BoardEntry(
        rank=rank,
        tied=tied,
        score_low=row.score_low,
        score_high=row.score_high,
        route=route,
        owner=owner,
        score=row.score,
        cost=row.cost,
        sha=row.sha,
        source=row.source,
        reason=row.reason,
        adopted=adopted,
        global_position=row.position,
        verifier_version=row.verifier_version,
        occurred_at=rfc3339(row.occurred_ns),
        check_id=row.check_id,
        reporter=row.reporter,
        runner=row.runner,
        job_id=row.job_id,
    )


def card(state: State, board: Board) -> board_pb2.BenchmarkCard:
    view = board_pb2.BenchmarkCard(
        version=board.version,
        status=standing.status(board, state.now_ns),
        status_reason=standing.status_reason(board, state.now_ns),
    )
    rules = board.card
    if rules is not None:
        view.name, view.task, view.metric, view.baseline = rules.name, rules.task, rules.metric, rules.baseline
        view.kernels.extend(rules.kernels)
        view.score_rule = rules.score_rule
        view.verifier_versions.extend(rules.verifier_versions)
        view.guardrails.extend(board_pb2.BoardGuardrail(name=n, value=v) for n, v in rules.guardrails)
        view.rules_commit = rules.rules_commit
        view.approved_at = rfc3339(rules.approved_ns)
        view.rules_error = rules.rules_error
    return view


def _owner(state: State, route: str) -> str:
    info = state.routes.get(route)
    return info.owner if info is not None else ""


def board_view(state: State, board: Board) -> board_pb2.BoardView:
    head = standing.header(state, board)
    view = board_pb2.BoardView(
        version=board.version,
        status=standing.status(board, state.now_ns),
        status_reason=standing.status_reason(board, state.now_ns),
        header=board_pb2.BoardHeader(
            agents_at_work=head.agents_at_work,
            agents_in_all=head.agents_in_all,
            routes=head.routes,
            last_active=rfc3339(head.last_active_ns),
            started=rfc3339(head.started_ns),
        ),
        log_position=state.position,
        card=card(state, board),
        earlier=board.version < state.in_force,
        current_version=state.in_force,
    )
    routes = board.routes
    view.ranked.extend(
        entry(p.route, p.entry, rank=p.rank, tied=p.tied, owner=_owner(state, p.route), adopted=routes[p.route].adopted)
        for p in standing.ranked(board)
    )
    view.listed_beside.extend(
        entry(route, row, rank=0, owner=_owner(state, route), adopted=routes[route].adopted)
        for route, row in standing.listed_beside(board)
    )
    return view


def problems_view(state: State, board: Board, speedups) -> board_pb2.BoardProblems:
    """Each problem's leader on ``board``; ``speedups``: the standing checks' problems by log position."""
    view = board_pb2.BoardProblems(
        version=board.version,
        name=board.card.name if board.card is not None else "",
        earlier=board.version < state.in_force,
        log_position=state.position,
    )
    view.problems.extend(problem_leader(state, leader) for leader in standing.problem_leaders(board, speedups))
    return view


def problem_leader(state: State, leader: standing.Leader) -> board_pb2.ProblemLeader:
    if leader.entry is None:
        return board_pb2.ProblemLeader(problem=leader.problem)
    e = leader.entry
    return board_pb2.ProblemLeader(
        problem=leader.problem,
        speedup=leader.speedup,
        route=leader.route,
        owner=_owner(state, leader.route),
        sha=e.sha,
        check_id=e.check_id,
        global_position=e.position,
        occurred_at=rfc3339(e.occurred_ns),
        job_id=e.job_id,
    )


def route_view(
    state: State, route: str, version: int = 0, events: dict[int, events_pb2.Event] | None = None
) -> board_pb2.BoardRoute | None:
    """The route on every board it is on (or on ``version`` only); None when the log never mentioned it there.

    ``events``: the log's events by position, for the history entries to show (those missing are left out).
    """
    events = events or {}
    info = state.routes.get(route)
    view = board_pb2.BoardRoute(route=route, log_position=state.position)
    if info is not None:
        view.owner, view.started_by, view.started = info.owner, info.started_by, rfc3339(info.started_ns)
    for number in sorted(state.boards):
        board = state.boards[number]
        on_board = board.routes.get(route)
        if on_board is None or (version and number != version):
            continue
        part = view.boards.add(
            version=number,
            adopted=on_board.adopted,
            checks=on_board.checks,
            checks_passed=on_board.checks_passed,
            reports=on_board.reports,
        )
        owner = view.owner
        for p in standing.ranked(board):
            if p.route == route:
                part.entries.append(
                    entry(route, p.entry, rank=p.rank, tied=p.tied, owner=owner, adopted=on_board.adopted)
                )
        for name, row in standing.listed_beside(board):
            if name == route:
                part.entries.append(entry(name, row, rank=0, owner=owner, adopted=on_board.adopted))
        for item in on_board.history[-HISTORY_SHOWN:]:
            event = events.get(item // 4)
            if event is None:
                continue
            r = standing.history_record(board, item % 4, event)
            record = part.history.add(
                global_position=r.position,
                occurred_at=rfc3339(r.occurred_ns),
                kind=r.kind,
                sha=r.sha,
                score=r.score,
                cost=r.cost,
                passed=r.passed,
                reasons=r.reasons,
                verifier_version=r.verifier_version,
                counted=r.counted,
                note=r.note,
                check_id=r.check_id,
                reporter=r.reporter,
                by_maintainer=r.by_maintainer,
            )
            if event.WhichOneof("payload") == "metrics_reported":  # a report's interval, where it gave one
                reported = event.metrics_reported
                record.score_low, record.score_high = reported.score_low, reported.score_high
            if event.WhichOneof("payload") == "check_completed":
                # The check's own words, as the verifier recorded them: its per-problem results and where it ran.
                check = event.check_completed
                record.subtasks.extend(check.subtasks)
                record.runner, record.verified = check.runner, check.verified
                record.incomplete, record.score_low, record.score_high = (
                    check.incomplete,
                    check.score_low,
                    check.score_high,
                )
                record.torch_version, record.triton_version = check.torch_version, check.triton_version
                record.rules_commit, record.job_id = check.rules_commit, check.job_id
                record.not_verified_because.extend(check.not_verified_because)
    if info is None and not view.boards:
        return None
    return view


def history_positions(state: State, route: str, version: int = 0) -> list[int]:
    """The log positions route_view shows in the route's history: the latest HISTORY_SHOWN per board."""
    positions = []
    for number, board in state.boards.items():
        on_board = board.routes.get(route)
        if on_board is not None and (not version or number == version):
            positions.extend(item // 4 for item in on_board.history[-HISTORY_SHOWN:])
    return sorted(positions)
