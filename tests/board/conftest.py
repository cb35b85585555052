"""The board's service tests: a database of our own per module on the real PostgreSQL, migrated, with the real log."""

import grpc
import pytest
from kernelboard.v1 import board_pb2_grpc

from services.board.api import add_to_server
from services.board.projector import Projector
from services.common import auth
from services.common.eventlog import EventLog
from services.common.grpcserver import start_server
from tests.support.databases import database_fixture, throwaway_database

from .board_events import append_all, scenario

database_url = database_fixture("board")


@pytest.fixture
async def fresh_log():
    """A real event log on a database of its own, for one test."""
    async with throwaway_database("board") as url:
        log = await EventLog.connect(url, migrate=True)
        yield log
        await log.close()


@pytest.fixture
async def served(fresh_log):
    """A board server (port 0, real auth) over the scenario's log; members: curator (maintainer), alice (member).
    Yields (stub, tokens by name, projector, log, address)."""
    async with fresh_log.pool.acquire() as conn:
        for name, role in (("curator", auth.MAINTAINER), ("alice", auth.MEMBER)):
            await auth.register_principal(conn, name, auth.PERSON, name, role, log=fresh_log, actor="system:admin")
        tokens = {name: await auth.issue_token(conn, name) for name in ("curator", "alice")}
    await append_all(fresh_log, scenario())
    projector = Projector(fresh_log)
    await projector.start()
    server = await start_server("board", add_to_server(projector), port=0, pool=fresh_log.pool)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")
    yield board_pb2_grpc.BoardStub(channel), tokens, projector, fresh_log, f"127.0.0.1:{server.port}"
    await channel.close()
    await server.stop(0)
