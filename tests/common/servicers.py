"""Test-only servicers that exercise the scaffolding: every RPC shape, aborts, errors, slow calls and auth.

They implement the generated service interfaces, the way each service will; none of this is product code.
"""

import asyncio

import grpc
from kernelboard.v1 import board_pb2, board_pb2_grpc, scheduler_pb2, scheduler_pb2_grpc, verifier_pb2, verifier_pb2_grpc

BOARD = board_pb2.DESCRIPTOR.services_by_name["Board"].full_name
SCHEDULER = scheduler_pb2.DESCRIPTOR.services_by_name["Scheduler"].full_name
VERIFIER = verifier_pb2.DESCRIPTOR.services_by_name["Verifier"].full_name
SLOW_VERSION_BASE = 1000  # GetBoard(version=1000 + ms) sleeps ms milliseconds: an in-flight call for shutdown tests


class TestBoard(board_pb2_grpc.BoardServicer):
    async def GetBoard(self, request, context):
        if request.version < 0:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"version must be >= 0, got {request.version}")
        if request.version == 99:
            raise RuntimeError("boom")
        if request.version >= SLOW_VERSION_BASE:
            await asyncio.sleep((request.version - SLOW_VERSION_BASE) / 1000)
        return board_pb2.BoardView(version=request.version, status=caller_summary())

    async def ListBoards(self, request, context):
        from contracts import access
        from services.common.auth import current_principal

        # Any maintainer-only action serves: this test servicer checks the interceptor and the message.
        access.require(access.Actor.of(current_principal()), access.Action.REBUILD)
        return board_pb2.ListBoardsReply(boards=[board_pb2.BoardView(status=caller_summary())])


class TestScheduler(scheduler_pb2_grpc.SchedulerServicer):
    """WatchJob as an async generator."""

    async def WatchJob(self, request, context):
        for state in ("PENDING", "RUNNING", "COMPLETED"):
            yield scheduler_pb2.Job(job_id=request.job_id, state=state, owner=caller_summary())


class TestVerifier(verifier_pb2_grpc.VerifierServicer):
    """WatchChecks as a coroutine that writes."""

    async def WatchChecks(self, request, context):
        for state in ("queued", "passed"):
            await context.write(verifier_pb2.Check(route=request.route, state=state, sha=caller_summary()))


def caller_summary() -> str:
    """``name|owner|role`` of the signed-in caller, or ``open`` when the method needs no sign-in."""
    from services.common.auth import current_principal

    try:
        principal = current_principal()
    except RuntimeError:
        return "open"
    return f"{principal.name}|{principal.owner}|{principal.role_name}"


def add_all(server: grpc.aio.Server) -> list[str]:
    board_pb2_grpc.add_BoardServicer_to_server(TestBoard(), server)
    scheduler_pb2_grpc.add_SchedulerServicer_to_server(TestScheduler(), server)
    verifier_pb2_grpc.add_VerifierServicer_to_server(TestVerifier(), server)
    return [BOARD, SCHEDULER, VERIFIER]
