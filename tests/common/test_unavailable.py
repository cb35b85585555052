"""PostgreSQL stopped under a running server (a throwaway cluster of our own): calls end UNAVAILABLE with a message
naming the event log, never UNKNOWN, and the same server answers again once PostgreSQL is back."""

import grpc
import pytest
from kernelboard.v1 import board_pb2, board_pb2_grpc, events_pb2
from prometheus_client import REGISTRY

from services.common import auth
from services.common.eventlog import EventLog
from services.common.grpcserver import start_server
from tests.common.servicers import BOARD
from tests.common.waiting import sample_reaches
from tests.e2e.stack import ThrowawayPostgres

GET_BOARD = f"/{BOARD}/GetBoard"


class EventCountBoard(board_pb2_grpc.BoardServicer):
    """GetBoard (open) and ListBoards (signed in) both read the log: the board's version is its number of events.
    Version 7 raises a ConnectionRefusedError of its own, not from the database."""

    def __init__(self, pool):
        self.pool = pool

    async def GetBoard(self, request, context):
        if request.version == 7:
            raise ConnectionRefusedError("a socket that is not PostgreSQL's")
        return board_pb2.BoardView(version=await self.pool.fetchval("SELECT count(*) FROM events"))

    async def ListBoards(self, request, context):
        count = await self.pool.fetchval("SELECT count(*) FROM events")
        return board_pb2.ListBoardsReply(boards=[board_pb2.BoardView(version=count)])


@pytest.fixture(scope="module")
async def postgres():
    cluster = ThrowawayPostgres()
    cluster.init()
    cluster.start()
    yield cluster
    try:
        cluster.stop("immediate")
    finally:
        cluster.remove()


@pytest.fixture(scope="module")
async def served(postgres):
    log = await EventLog.connect(postgres.url, min_size=1, max_size=3)
    async with log.pool.acquire() as conn:
        await auth.register_principal(
            conn, "alice", events_pb2.PRINCIPAL_KIND_PERSON, "alice", events_pb2.ROLE_MEMBER, log=log, actor="test"
        )
        token = await auth.issue_token(conn, "alice")

    def add(server):
        board_pb2_grpc.add_BoardServicer_to_server(EventCountBoard(log.pool), server)
        return [BOARD]

    started = await start_server("unavailable", add, port=0, pool=log.pool, open_methods={GET_BOARD})
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{started.port}")
    yield board_pb2_grpc.BoardStub(channel), (("authorization", f"Bearer {token}"),)
    await channel.close()
    await started.stop(0)
    await log.close()


def unavailable_labels(method: str) -> dict[str, str]:
    return {"service": BOARD, "method": method, "code": "UNAVAILABLE"}


def unavailable_count(method: str) -> float:
    return REGISTRY.get_sample_value("kb_grpc_requests_total", unavailable_labels(method)) or 0.0


async def test_calls_are_unavailable_while_postgres_is_down_and_answer_again_after(postgres, served):
    stub, signed_in = served
    events_before = (await stub.GetBoard(board_pb2.GetBoardRequest())).version
    assert (await stub.ListBoards(board_pb2.ListBoardsRequest(), metadata=signed_in)).boards[0].version == events_before

    postgres.stop("fast")  # the pool's open connections are cut; new ones are refused
    before = {method: unavailable_count(method) for method in ("GetBoard", "ListBoards")}
    for call in (
        stub.GetBoard(board_pb2.GetBoardRequest()),  # the handler's own query fails
        stub.GetBoard(board_pb2.GetBoardRequest()),  # the pool now has to connect anew: refused
        stub.ListBoards(board_pb2.ListBoardsRequest(), metadata=signed_in),  # the token lookup fails first
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE, caught.value.details()
        assert caught.value.details().startswith("event log unavailable: "), caught.value.details()
    await sample_reaches("kb_grpc_requests_total", unavailable_labels("GetBoard"), before["GetBoard"] + 2)
    await sample_reaches("kb_grpc_requests_total", unavailable_labels("ListBoards"), before["ListBoards"] + 1)

    postgres.start()
    assert (await stub.GetBoard(board_pb2.GetBoardRequest())).version == events_before
    assert (await stub.ListBoards(board_pb2.ListBoardsRequest(), metadata=signed_in)).boards[0].version == events_before


async def test_a_connection_error_outside_the_database_stays_unknown(served):
    stub, _ = served
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.GetBoard(board_pb2.GetBoardRequest(version=7))
    assert caught.value.code() == grpc.StatusCode.UNKNOWN
