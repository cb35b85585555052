"""The Board gRPC servicer: checks each request, answers from the projector's memory, times every query."""

import time
from contextlib import contextmanager

import grpc
from kernelboard.v1 import board_pb2, board_pb2_grpc, events_pb2

from contracts import access
from services.board.projection import SET_STATUSES
from services.board.projector import Projector, RebuildRunning, UnknownBoard
from services.common import metrics
from services.common.auth import current_principal
from services.common.eventlog import NewEvent

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


async def _check_version(version: int, context) -> None:
    if version < 0:
        await context.abort(
            grpc.StatusCode.INVALID_ARGUMENT, f"version must be 0 (the newest) or a benchmark version, not {version}"
        )


def _without_position(view: board_pb2.BoardView) -> bytes:
    """A view's bytes with log_position cleared: an event that changes nothing else is not a change to watchers."""
    copy = board_pb2.BoardView()
    copy.CopyFrom(view)
    copy.log_position = 0
    return copy.SerializeToString(deterministic=True)


class BoardServicer(board_pb2_grpc.BoardServicer):
    def __init__(self, projector: Projector):
        self.projector = projector

    async def GetBoard(self, request, context):
        await _check_version(request.version, context)
        with _timed("GetBoard"):
            try:
                return self.projector.board_view(request.version)
            except UnknownBoard as err:
                await context.abort(grpc.StatusCode.NOT_FOUND, str(err))

    async def ListBoards(self, request, context):
        with _timed("ListBoards"):
            return board_pb2.ListBoardsReply(boards=[self.projector.board_view(v) for v in self.projector.versions()])

    async def GetRoute(self, request, context):
        await _check_version(request.version, context)
        if not request.route:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "route is required: the route's name, e.g. 'fast'")
        with _timed("GetRoute"):
            try:
                return await self.projector.route(request.route, request.version)
            except UnknownBoard as err:
                await context.abort(grpc.StatusCode.NOT_FOUND, str(err))

    async def GetBenchmark(self, request, context):
        await _check_version(request.version, context)
        with _timed("GetBenchmark"):
            try:
                return self.projector.card(request.version)
            except UnknownBoard as err:
                await context.abort(grpc.StatusCode.NOT_FOUND, str(err))

    async def WatchBoard(self, request, context):
        """The board now, then each change; version 0 follows the newest board, waiting for a first one."""
        await _check_version(request.version, context)
        sent = None
        while True:
            changed = self.projector.changed()
            started = time.perf_counter()
            try:
                view = self.projector.board_view(request.version)
            except UnknownBoard as err:
                if request.version:
                    await context.abort(grpc.StatusCode.NOT_FOUND, str(err))
                view = None
            if view is not None:
                key = _without_position(view)
                if key != sent:
                    QUERY_SECONDS.labels("WatchBoard").observe(time.perf_counter() - started)
                    yield view
                    sent = key
            await changed.wait()

    async def Rebuild(self, request, context):
        require(access.Action.REBUILD)
        try:
            return await self.projector.rebuild()
        except RebuildRunning as err:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(err))

    async def AdoptRoute(self, request, context):
        actor = require(access.Action.ADOPT_ROUTE)
        await _check_version(request.version, context)
        if not request.route:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "route is required: the route's name, e.g. 'fast'")
        version = await self._board_version(request.version, context)
        if request.route not in self.projector.state.boards[version].routes:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"route {request.route!r} is not on board {version}")
        adopted = events_pb2.RouteAdopted(
            route=request.route, benchmark_version=version, adopted=request.adopted, note=request.note
        )
        return await self._append(version, adopted, actor.name)

    async def SetBenchmarkStatus(self, request, context):
        actor = require(access.Action.SET_STATUS)
        await _check_version(request.version, context)
        if request.status not in SET_STATUSES:
            choices = ", ".join(sorted(SET_STATUSES))
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"status must be one of {choices}, not {request.status!r}"
            )
        if request.status != "active" and not request.reason.strip():
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"a reason is required to mark a board {request.status}"
            )
        version = await self._board_version(request.version, context)
        changed = events_pb2.BenchmarkStatusChanged(
            benchmark_version=version, status=request.status, reason=request.reason.strip()
        )
        return await self._append(version, changed, actor.name)

    async def _board_version(self, version: int, context) -> int:
        try:
            return self.projector.resolve(version)
        except UnknownBoard as err:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(err))

    async def _append(self, version: int, payload, actor: str) -> board_pb2.BoardChangeReply:
        (appended,) = await self.projector.log.append(f"benchmark:{version}", None, [NewEvent(payload, actor=actor)])
        return board_pb2.BoardChangeReply(version=version, global_position=appended.global_position)


def require(action: access.Action) -> access.Actor:
    """The caller, when contracts.access allows it the action; else the PERMISSION_DENIED Refusal."""
    return access.require(access.Actor.of(current_principal()), action)


def add_to_server(projector: Projector):
    def add(server: grpc.aio.Server):
        board_pb2_grpc.add_BoardServicer_to_server(BoardServicer(projector), server)
        return [board_pb2.DESCRIPTOR.services_by_name["Board"].full_name]

    return add
