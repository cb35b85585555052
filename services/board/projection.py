"""The board projection: the fold that decides what ranks, what is listed beside, each problem's leader and each
board's status, into the state of state.py; standing.py reads those decisions out of the folded state for the views,
and the rules below are their one account.

A pure fold over the event log: ``apply(state, event) -> state`` and ``fold(events) -> state``. No I/O and no wall
clock: "now" is the latest event time folded, so a rebuild from position 0 gives the same boards as the live fold.
``apply`` updates the state it is given in place and returns it: copying the state per event would cost the
rebuild its throughput. Events at or below the state's position are skipped, so a duplicate or a redelivery changes
nothing (the log delivers events in position order).

The rules, as this module applies them (docs/ARCHITECTURE.md, "Board rules"):

- Boards: one per benchmark version. An event whose payload names a version (RulesApproved, CheckCompleted,
  MetricsReported, BenchmarkStatusChanged, RouteAdopted; 0 meaning "not given") belongs to that board; any other
  event belongs to the board in force, the highest version whose rules were approved so far (none before the first
  RulesApproved). Old boards stay readable.
- Ranked: a route's best passing verified check on that board (source "verified"; an equal score later keeps the
  earlier; verified means judged on the rules' pinned runner at full shapes, so a CPU-profile pass never ranks) and
  its latest report by a maintainer ("reported by maintainer"; a report's reason is its own account of the measurement,
  runner, time and rules commit, when its metrics.json gives one). Higher scores rank first, then the earlier log
  position. A check counts only when the board's rules accept its verifier version (the rules'
  ``benchmark.verifier_versions`` list or ``benchmark.verifier_version``; rules naming neither accept any); a score
  that is not a finite number never ranks.
- Ranked with its noise: each entry keeps its score's interval (CheckCompleted / MetricsReported score_low and
  score_high; none, or one that is not finite or does not hold the score, is the score alone). Entries whose
  intervals overlap cannot be ordered by the board: they are **tied**, sharing one place numbered by its first
  position ("=2"); a place is the shortest run of entries, in score order, that no overlap crosses.
- Earlier boards: once a later version's rules are approved, a board is earlier: kept as it was, read-only (new
  checks are requested under the rules in force and land on the current board).
- Listed beside, unranked: a route's latest report by anyone else ("reported") and, while the route's latest counted
  check failed, that check with its reasons ("failed check"), or passed without being verified, that check with why
  it is not verified ("unverified check"), or left a problem not judged, that check with which ("incomplete check").
- Disqualified: a maintainer's CheckDisqualified takes a verified check out of the ranking after the fact (a cheat
  found later): the route ranks with its best check that is not disqualified, and the disqualified check is listed
  beside ("disqualified", its score kept as evidence, the maintainer and the reason shown). A later CheckDisqualified
  with disqualified = false reinstates it. The order of the two events does not matter: a check disqualified before
  its result was folded never ranks.
- Per problem: each problem's leader is the best speed-up any route's verified check (not disqualified) measured on
  it, the problem submitted, with a finite positive speed-up; ties go to the earlier check. Reports say nothing per
  problem, so they lead none. The fold keeps each verified check's place (its entry in the route's passes), not its
  problems: reading twelve problems from every check halved the fold's rate (bench/board/results.md), so the board
  service reads the problems of the checks that stand from the log when asked (GetProblems) and keeps them.
- Adopted: the latest RouteAdopted for the route on that board.
- History: a route's checks, reports and adoption marks on a board are kept as their log positions with what the
  fold decided of each (counted, or why not); GetRoute reads those events back from the log.
- Status: the latest of the rules' ``benchmark.status`` and BenchmarkStatusChanged (active, saturated, superseded,
  flawed); an active board reads "quiet" once no score has been placed on it (ranked or beside; failed checks are
  not scores) for 14 days, counted from its start when it has none.
- Header: routes = routes started or pushed while the board was in force, or with a result on it; agents = the
  principals registered as agents, and any other actor seen acting for a different owner (a commit's actor that is
  not its owner, a route started by someone for its owner) that is not registered as a person or service and is
  not a ``system:`` identity; "agents in all" = agents that were the actor of an event of the board, "agents at work"
  = those whose latest such event is within the 7 days before "now"; started / last active = the board's first and
  latest event times.
"""

import math
from collections.abc import Callable, Iterable

from kernelboard.v1 import events_pb2

from contracts import results, rules
from services.board.state import (
    COUNTED,
    NOT_ACCEPTED,
    NOT_FINITE,
    NOT_VERIFIED,
    SET_STATUSES,
    Board,
    Card,
    Entry,
    RouteInfo,
    RouteOnBoard,
    State,
)

# Raise it whenever a change here would fold the same log differently: a stored copy of another version is refolded.
PROJECTION_VERSION = 8

NS_PER_DAY = 86_400 * 1_000_000_000
QUIET_AFTER_NS = 14 * NS_PER_DAY
AT_WORK_WITHIN_NS = 7 * NS_PER_DAY

# The sources' names are shared with every surface that words an entry (contracts/results.py).
VERIFIED = results.VERIFIED
REPORTED_BY_MAINTAINER = results.REPORTED_BY_MAINTAINER
REPORTED = results.REPORTED
FAILED_CHECK = results.FAILED_CHECK
UNVERIFIED_CHECK = results.UNVERIFIED_CHECK
INCOMPLETE_CHECK = results.INCOMPLETE_CHECK
DISQUALIFIED = results.DISQUALIFIED


_AGENT = events_pb2.PRINCIPAL_KIND_AGENT
_isfinite = math.isfinite
_new = tuple.__new__  # builds a NamedTuple without its Python-level __new__: the fold's hot path
# The method itself: event.WhichOneof looks the name up among the fields first and builds a bound method per event.
_which_oneof = events_pb2.Event.WhichOneof


# ---- the fold ----------------------------------------------------------------------------------------------------


# Told of each event the fold sets aside, with why: the fold goes on past it, whatever folds it (a start, the live
# consumer, a rebuild) alike, so that they agree; the caller logs and counts it (services/common/setaside.py).
SetAsideHook = Callable[[events_pb2.Event, str], None]


def _ignore(_event: events_pb2.Event, _reason: str) -> None:
    pass


def fold(events: Iterable[events_pb2.Event], state: State | None = None, set_aside: SetAsideHook = _ignore) -> State:
    state = State() if state is None else state
    _fold_into(state, events, set_aside)
    return state


def apply(state: State, event: events_pb2.Event, set_aside: SetAsideHook = _ignore) -> State:
    _fold_into(state, (event,), set_aside)
    return state


def _fold_into(state: State, events: Iterable[events_pb2.Event], set_aside: SetAsideHook = _ignore) -> None:
    """The fold's one loop, for a rebuild and for each live event alike (a rebuild pays no call per event for apply).

    Reading the protobuf is half of each event's cost: upb finds a field by its name on every access, and a
    sub-message (the time) is a new Python object each time. So each field is read once, the envelope's here and the
    payload's in its handler where they decide something; an event of a kind the fold does not read is only
    activity on the board in force; and the event's board is resolved here, once, for every handler.
    """
    handlers = _HANDLERS
    boards = state.boards
    touched_boards = state.touched_boards
    for event in events:
        position = event.global_position
        if position <= state.position:
            continue  # folded already: a duplicate or a redelivery
        kind = _which_oneof(event, "payload")
        at = event.occurred_at
        ns = at.seconds * 1_000_000_000 + at.nanos  # times stay integer nanoseconds: no datetime per event
        if ns > state.now_ns:
            state.now_ns = ns
        actor = event.actor
        handler, names_version = handlers.get(kind, _ACTIVITY_ONLY)
        payload = version = None
        if handler is not None:
            payload = getattr(event, kind)
            if names_version:
                version = payload.benchmark_version
                if version < 0 and kind == "rules_approved":
                    version = 0  # rules without a version are only activity on the board in force
                elif version < 0:
                    # No board has a negative number (nor could its row be stored): the event is set aside.
                    set_aside(event, f"benchmark_version {version} < 0")
                    state.position = position
                    continue

        # The event's board (0 or none named: the board in force), created on its first event, with the event's
        # activity recorded on it. None before any rules.
        if not version:
            version = state.in_force
        board = boards.get(version)
        if board is None and version:
            board = boards[version] = Board(version, ns)
        if board is not None:
            touched_boards.add(version)
            if ns > board.last_active_ns:
                board.last_active_ns = ns
            if actor and ns >= board.actors.get(actor, ns):
                board.actors[actor] = ns

        if handler is not None:
            try:
                handler(state, board, event, payload, actor, position, ns)
            except Exception as err:  # one event the fold cannot take must not stop every start and rebuild
                set_aside(event, f"{type(err).__name__}: {err}")
        state.position = position


def _route(state: State, board: Board, route: str) -> RouteOnBoard:
    on_board = board.routes.get(route)
    if on_board is None:
        on_board = board.routes[route] = RouteOnBoard((board.version, route))
    state.touched_routes.add(on_board.key)
    return on_board


def _acting_for(state: State, actor: str, owner: str) -> None:
    if actor and owner and actor != owner and actor not in state.not_agents and not actor.startswith("system:"):
        state.agents.add(actor)


# Each handler gets the event's board (None before any rules), the event, its payload, and the envelope's actor,
# position and time (integer nanoseconds), already read.


def _on_principal_registered(state: State, board, event, payload, actor: str, position: int, ns: int) -> None:
    name = payload.name
    if payload.kind == _AGENT:
        state.agents.add(name)
        state.not_agents.discard(name)
    else:
        state.not_agents.add(name)
        state.agents.discard(name)


def _on_route_started(state: State, board, event, payload, actor: str, position: int, ns: int) -> None:
    route, owner, started_by = payload.route, payload.owner, payload.started_by
    if route and route not in state.routes:
        state.routes[route] = RouteInfo(owner, started_by, ns, position)
    _acting_for(state, started_by, owner)
    if board is not None and route:
        _route(state, board, route)


def _on_commit_ingested(state: State, board, event, payload, actor: str, position: int, ns: int) -> None:
    _acting_for(state, actor, payload.owner)
    if board is not None:
        route = payload.route
        if route:
            _route(state, board, route)


def _on_rules_approved(state: State, board, event, payload, actor: str, position: int, ns: int) -> None:
    version = payload.benchmark_version
    if version <= 0:
        return  # not a version: only activity on the board in force
    if version > state.in_force:
        state.in_force = version
    card, status = read_card(payload.rules_json, payload.rules_commit, ns)
    board.card = card
    if status in SET_STATUSES:
        board.status, board.status_reason = status, "set in the rules"


def _on_metrics_reported(state: State, board, event, payload, actor: str, position: int, ns: int) -> None:
    if board is None:
        return
    route = payload.route
    if not route:
        return
    on_board = _route(state, board, route)
    on_board.reports += 1
    score = payload.score
    counted = _isfinite(score)
    if counted:
        by_maintainer = payload.by_maintainer
        runner = payload.runner
        entry = Entry(
            REPORTED_BY_MAINTAINER if by_maintainer else REPORTED,
            score,
            payload.cost,
            payload.sha,
            _measured(runner, payload.measured_at, payload.rules_commit),
            position,
            ns,
            0,
            "",
            payload.reporter or actor,
            runner,
            *_noise(score, payload.score_low, payload.score_high),
            "",
        )
        if by_maintainer:
            on_board.by_maintainer = entry
        else:
            on_board.reported = entry
        board.last_scored_ns = ns
    on_board.history.append(position * 4 + (COUNTED if counted else NOT_FINITE))


def _noise(score: float, low: float, high: float) -> tuple[float, float]:
    """The interval an event gives its score, as the board keeps it: (0, 0), none, unless both bounds are finite and
    hold the score (the verifier and ingest refuse others; an event in the log is still read as hostile)."""
    if _isfinite(low) and _isfinite(high) and low <= score <= high and (low, high) != (0.0, 0.0):
        return low, high
    return 0.0, 0.0


def _measured(runner: str, measured_at: str, rules_commit: str) -> str:
    """A report's own account of its measurement (metrics.json's "report"), "" when it gives none."""
    parts = [f"measured {measured_at}" if measured_at else "", f"on {runner}" if runner else ""]
    parts.append(f"under rules {rules_commit[:12]}" if rules_commit else "")
    return " ".join(p for p in parts if p)


def _on_check_completed(state: State, board, event, payload, actor: str, position: int, ns: int) -> None:
    if board is None:
        return
    route = payload.route
    if not route:
        return
    on_board = _route(state, board, route)
    on_board.checks += 1
    passed = payload.passed
    score = payload.score
    code = COUNTED
    card = board.card  # rules naming no verifier version accept any
    if card is not None and card.verifier_versions and event.verifier_version not in card.verifier_versions:
        code = NOT_ACCEPTED
    elif payload.incomplete:
        # some problem was not judged (the judge's failure, not the route's): listed beside, never a score
        reason = results.incomplete_reason(payload)
        on_board.failed = _check_entry(INCOMPLETE_CHECK, score, reason, event, payload, position, ns)
    elif passed and not _isfinite(score):
        code = NOT_FINITE
    elif passed and not payload.verified:
        code = NOT_VERIFIED
        # [:] copies the repeated field into a list in one call; join would otherwise iterate the upb container
        reason = "; ".join(payload.not_verified_because[:]) or "the check passed but is not a verified score"
        on_board.failed = _check_entry(UNVERIFIED_CHECK, score, reason, event, payload, position, ns)
    elif passed:
        on_board.checks_passed += 1
        on_board.failed = None
        placed = _check_entry(VERIFIED, score, "", event, payload, position, ns)
        on_board.passes.append(placed)
        best = on_board.verified
        if (best is None or score > best.score) and placed.check_id not in on_board.disqualified:
            on_board.verified = placed
        board.last_scored_ns = ns
    else:
        reason = "; ".join(payload.reasons[:]) or "the check failed without a reason"  # [:]: as above
        on_board.failed = _check_entry(FAILED_CHECK, score, reason, event, payload, position, ns)
    on_board.history.append(position * 4 + code)


def _check_entry(source: str, score: float, reason: str, event, payload, position: int, ns: int) -> Entry:
    """The entry a check places; its other fields are read only for the checks that place one."""
    return _new(
        Entry,
        (
            source,
            score,
            payload.cost,
            payload.sha,
            reason,
            position,
            ns,
            event.verifier_version,
            payload.check_id,
            "",
            payload.runner,
            *_noise(score, payload.score_low, payload.score_high),
            payload.job_id,
        ),
    )


def _on_benchmark_status_changed(state: State, board, event, payload, actor: str, position: int, ns: int) -> None:
    if board is None:
        return
    status = payload.status
    if status in SET_STATUSES:
        board.status, board.status_reason = status, payload.reason


def _on_check_disqualified(state: State, board, event, payload, actor: str, position: int, ns: int) -> None:
    if board is None:
        return
    route, check_id = payload.route, payload.check_id
    if not route or not check_id:
        return
    on_board = _route(state, board, route)
    if payload.disqualified:
        on_board.disqualified[check_id] = (actor, payload.reason)
    else:
        on_board.disqualified.pop(check_id, None)
    on_board.verified = _best_pass(on_board)
    on_board.history.append(position * 4 + COUNTED)


def _best_pass(on_board: RouteOnBoard) -> Entry | None:
    """The route's best verified pass that is not disqualified; an equal score later keeps the earlier."""
    best = None
    for placed in on_board.passes:
        if placed.check_id not in on_board.disqualified and (best is None or placed.score > best.score):
            best = placed
    return best


def _on_route_adopted(state: State, board, event, payload, actor: str, position: int, ns: int) -> None:
    if board is None:
        return
    route = payload.route
    if not route:
        return
    on_board = _route(state, board, route)
    on_board.adopted = payload.adopted
    on_board.history.append(position * 4 + COUNTED)


# The payload cases the fold reads: each with its handler and whether the payload names its board's version
# (benchmark_version; 0: not given, the board in force). Any other event is only activity on the board in force.
_HANDLERS = {
    "principal_registered": (_on_principal_registered, False),
    "route_started": (_on_route_started, False),
    "commit_ingested": (_on_commit_ingested, False),
    "rules_approved": (_on_rules_approved, True),
    "metrics_reported": (_on_metrics_reported, True),
    "check_completed": (_on_check_completed, True),
    "benchmark_status_changed": (_on_benchmark_status_changed, True),
    "route_adopted": (_on_route_adopted, True),
    "check_disqualified": (_on_check_disqualified, True),
}
_ACTIVITY_ONLY = (None, False)


# ---- the rules text ----------------------------------------------------------------------------------------------


def read_card(rules_json: str, rules_commit: str, approved_ns: int) -> tuple[Card, str]:
    """The judging card and the status the rules set (contracts.rules.read_card). Never raises: unreadable rules give
    a card saying why."""
    read = rules.read_card(rules_json)
    card = Card(
        name=read.name,
        task=read.task,
        metric=read.metric,
        baseline=read.baseline,
        kernels=read.kernels,
        score_rule=read.score_rule,
        verifier_versions=read.verifier_versions,
        guardrails=read.guardrails,
        rules_commit=rules_commit,
        approved_ns=approved_ns,
        rules_error=read.error,
    )
    return card, read.status
