"""A real ingest service for the tests: its own PostgreSQL database, a hosted repository under a temporary KB_HOME,
the gRPC server on an ephemeral port, the seeded main/checks/triton, and the cast: two people with an agent each
(alice, bob), a maintainer (curator) and an outsider (mallory)."""

from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from kernelboard.v1 import events_pb2, ingest_pb2_grpc

from services.common import auth
from services.common.eventlog import EventLog
from services.common.grpcserver import start_server
from services.ingest.api import add_to_server, server_options
from services.ingest.app import Ingest
from services.ingest.gitrepo import HostedRepo
from services.ingest.seed import seed
from tests.support.databases import database_fixture

MAX_BUNDLE_BYTES = 512 * 1024


database_url = database_fixture("ingest")


@dataclass
class Stack:
    log: EventLog
    ingest: Ingest
    home: Path
    stub: ingest_pb2_grpc.IngestStub
    tokens: dict[str, str]
    port: int
    database_url: str

    def md(self, who: str):
        return (("authorization", f"Bearer {self.tokens[who]}"),)

    async def events(self, type_: str) -> list[events_pb2.Event]:
        return [e async for e in self.log.read_all(0, types={type_})]


CAST = [
    # name, kind, owner, role
    ("alice", events_pb2.PRINCIPAL_KIND_PERSON, "alice", events_pb2.ROLE_MEMBER),
    ("alice/agent-1", events_pb2.PRINCIPAL_KIND_AGENT, "alice", events_pb2.ROLE_UNSPECIFIED),
    ("bob", events_pb2.PRINCIPAL_KIND_PERSON, "bob", events_pb2.ROLE_MEMBER),
    ("bob/agent-1", events_pb2.PRINCIPAL_KIND_AGENT, "bob", events_pb2.ROLE_UNSPECIFIED),
    ("mallory", events_pb2.PRINCIPAL_KIND_PERSON, "mallory", events_pb2.ROLE_SIGNED_IN),
]


@pytest.fixture(scope="module")
async def stack(database_url, tmp_path_factory):
    home = tmp_path_factory.mktemp("kb_home")
    log = await EventLog.connect(database_url)
    ingest = Ingest(log, HostedRepo(home / "repo.git"), max_bundle_bytes=MAX_BUNDLE_BYTES)
    await ingest.start()
    await seed(ingest, home)
    tokens = {
        "curator": (home / "curator.token").read_text().strip(),
        "system:scheduler": (home / "scheduler.token").read_text().strip(),
    }
    async with log.pool.acquire() as conn:
        for name, kind, owner, role in CAST:
            await auth.register_principal(conn, name, kind, owner, role, log=log, actor="test")
            tokens[name] = await auth.issue_token(conn, name)
    started = await start_server(
        "ingest",
        lambda server: add_to_server(server, ingest),
        port=0,
        pool=log.pool,
        options=server_options(MAX_BUNDLE_BYTES),
    )
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{started.port}")
    yield Stack(log, ingest, home, ingest_pb2_grpc.IngestStub(channel), tokens, started.port, database_url)
    await channel.close()
    await started.stop(0)
    await ingest.stop()
    await log.close()
