"""The Board gRPC servicer: checks each request, answers from the projector's memory, times every query."""

import time
from contextlib import contextmanager

import grpc
from kernelboard.v1 import board_pb2, board_pb2_grpc, events_pb2

from contracts import access, names
from contracts.refusals import clip, conflict, invalid, not_found, precondition
from services.board import standing
from services.board.projector import Projector, UnknownBoard
from services.board.state import SET_STATUSES
from services.common import metrics
from services.common.auth import current_principal
from services.common.eventlog import ConcurrencyConflict, NewEvent

QUERY_SECONDS = metrics.histogram(
    "kb_board_query_seconds",
    "Time to answer a board query from memory, by method (WatchBoard: each update).",
    ("method",),
    buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
)


@contextmanager
def _timed(method: str):
    started = time.perf_counter()
    try:
        yield
    finally:
        QUERY_SECONDS.labels(method).observe(time.perf_counter() - started)


NOTE_MAX_CHARS = 2000  # an adoption's note, a status's reason


def board_version(version: int) -> int:
    if version < 0:
        raise invalid("bad_version", f"version must be 0 (the newest) or a benchmark version, not {version}")
    return version


def route_name(value: str) -> str:
    if not value:
        raise invalid("route_required", "route is required: the route's name, e.g. 'fast'")
    return names.route(value)


def _without_position(view: board_pb2.BoardView) -> bytes:
    """A view's bytes with log_position cleared: an event that changes nothing else is not a change to watchers."""
    copy = board_pb2.BoardView()
    copy.CopyFrom(view)
    copy.log_position = 0
    return copy.SerializeToString(deterministic=True)


class BoardServicer(board_pb2_grpc.BoardServicer):
    """Checks each request's fields (contracts.names), then answers from the projector; a Refusal becomes its
    status in the server's interceptor."""

    def __init__(self, projector: Projector):
        self.projector = projector

    async def GetBoard(self, request, context):
        version = board_version(request.version)
        with _timed("GetBoard"):
            return self.projector.board_view(version)

    async def GetProblems(self, request, context):
        version = board_version(request.version)
        with _timed("GetProblems"):
            return await self.projector.problems(version)

    async def ListBoards(self, request, context):
        with _timed("ListBoards"):
            return board_pb2.ListBoardsReply(boards=[self.projector.board_view(v) for v in self.projector.versions()])

    async def GetRoute(self, request, context):
        version, route = board_version(request.version), route_name(request.route)
        with _timed("GetRoute"):
            return await self.projector.route(route, version)

    async def GetBenchmark(self, request, context):
        version = board_version(request.version)
        with _timed("GetBenchmark"):
            return self.projector.card(version)

    async def WatchBoard(self, request, context):
        """The board now, then each change; version 0 follows the newest board, waiting for a first one."""
        version = board_version(request.version)
        sent = None
        while True:
            changed = self.projector.changed()
            started = time.perf_counter()
            try:
                view = self.projector.board_view(version)
            except UnknownBoard:
                if version:
                    raise
                view = None  # version 0 waits for a first board
            if view is not None:
                key = _without_position(view)
                if key != sent:
                    QUERY_SECONDS.labels("WatchBoard").observe(time.perf_counter() - started)
                    yield view
                    sent = key
            await changed.wait()

    async def Rebuild(self, request, context):
        require(access.Action.REBUILD)
        return await self.projector.rebuild()

    async def AdoptRoute(self, request, context):
        actor = require(access.Action.ADOPT_ROUTE)
        version, route = board_version(request.version), route_name(request.route)
        note = names.text(request.note, "note", NOTE_MAX_CHARS)
        version = self.projector.resolve(version)
        if route not in self.projector.state.boards[version].routes:
            raise not_found("route_not_on_board", f"route {route!r} is not on board {version}")
        adopted = events_pb2.RouteAdopted(route=route, benchmark_version=version, adopted=request.adopted, note=note)
        return await self._append(version, adopted, actor.name)

    async def SetBenchmarkStatus(self, request, context):
        actor = require(access.Action.SET_STATUS)
        version = board_version(request.version)
        if request.status not in SET_STATUSES:
            choices = ", ".join(sorted(SET_STATUSES))
            raise invalid("bad_status", f"status must be one of {choices}, not {clip(request.status)}")
        reason = names.text(request.reason, "reason", NOTE_MAX_CHARS).strip()
        if request.status != "active" and not reason:
            raise invalid("reason_required", f"a reason is required to mark a board {request.status}")
        version = self.projector.resolve(version)
        changed = events_pb2.BenchmarkStatusChanged(benchmark_version=version, status=request.status, reason=reason)
        return await self._append(version, changed, actor.name)

    async def DisqualifyCheck(self, request, context):
        actor = require(access.Action.DISQUALIFY)
        check_id = names.check_id(request.check_id)
        reason = names.text(request.reason, "reason", NOTE_MAX_CHARS).strip()
        if not reason:
            doing = "reinstate" if request.reinstate else "disqualify"
            raise invalid("reason_required", f"a reason is required to {doing} a check")
        found = standing.find_pass(self.projector.state, check_id)
        if found is None:
            raise not_found("unknown_check", f"no verified check {check_id} on any board (only those rank)")
        version, route, placed = found
        # Whether it stands disqualified is read from the check's own stream, which the verdict is appended to at the
        # version read: two maintainers at once, or a verdict the board has not folded yet, never make two verdicts.
        stream = names.check_stream(check_id)
        history = await self.projector.log.read_stream(stream)
        verdicts = [e.check_disqualified for e in history if e.WhichOneof("payload") == "check_disqualified"]
        disqualified = bool(verdicts) and verdicts[-1].disqualified
        if disqualified != request.reinstate:
            now = "disqualified already" if disqualified else "not disqualified: nothing to reinstate"
            raise precondition("disqualified" if disqualified else "not_disqualified", f"check {check_id} is {now}")
        verdict = events_pb2.CheckDisqualified(
            check_id=check_id,
            route=route,
            sha=placed.sha,
            benchmark_version=version,
            reason=reason,
            disqualified=not request.reinstate,
        )
        at = history[-1].stream_version if history else 0
        try:
            (appended,) = await self.projector.log.append(stream, at, [NewEvent(verdict, actor=actor.name)])
        except ConcurrencyConflict:
            raise conflict("verdict_moved", f"check {check_id} was judged meanwhile: look again") from None
        return board_pb2.BoardChangeReply(version=version, global_position=appended.global_position)

    async def _append(self, version: int, payload, actor: str) -> board_pb2.BoardChangeReply:
        (appended,) = await self.projector.log.append(
            names.benchmark_stream(version), None, [NewEvent(payload, actor=actor)]
        )
        return board_pb2.BoardChangeReply(version=version, global_position=appended.global_position)


def require(action: access.Action) -> access.Actor:
    """The caller, when contracts.access allows it the action; else the PERMISSION_DENIED Refusal."""
    return access.require(access.Actor.of(current_principal()), action)


def add_to_server(projector: Projector):
    def add(server: grpc.aio.Server):
        board_pb2_grpc.add_BoardServicer_to_server(BoardServicer(projector), server)
        return [board_pb2.DESCRIPTOR.services_by_name["Board"].full_name]

    return add
