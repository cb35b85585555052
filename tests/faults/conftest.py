"""tests/faults: one private stack for the module, on a throwaway PostgreSQL cluster and a private nats-server (both
of which the tests restart; the machine's own servers are never touched)."""

import grpc
import pytest
from kernelboard.v1 import board_pb2_grpc, ingest_pb2_grpc, scheduler_pb2_grpc, verifier_pb2_grpc

from tests.e2e.stack import Stack, slurm_conf


@pytest.fixture(scope="module")
async def stack(tmp_path_factory):
    conf = slurm_conf()
    assert conf, "SLURM_CONF must name the local cluster (deploy/local/slurm/up.sh prints it; make up records it)"
    root = tmp_path_factory.mktemp("faults")
    stack = Stack(root, conf, private_postgres=True, extra_env={"KB_VERIFIER_LEASE_S": "5"})
    try:
        await stack.setup()
        yield stack
    finally:
        await stack.teardown()


@pytest.fixture(scope="module")
def tokens(stack):
    stack.kb("admin", "user", "add", "alice", "--role", "member")
    stack.kb("admin", "user", "add", "alice/agent-1", "--agent-of", "alice")
    agent = stack.kb("admin", "token", "issue", "alice/agent-1").stdout.strip()
    return {"curator": stack.token("curator"), "agent": agent}


class Stubs:
    def __init__(self, stack):
        self.channels = {
            name: grpc.aio.insecure_channel(stack.address(name))
            for name in ("ingest", "scheduler", "verifier", "board")
        }
        self.ingest = ingest_pb2_grpc.IngestStub(self.channels["ingest"])
        self.scheduler = scheduler_pb2_grpc.SchedulerStub(self.channels["scheduler"])
        self.verifier = verifier_pb2_grpc.VerifierStub(self.channels["verifier"])
        self.board = board_pb2_grpc.BoardStub(self.channels["board"])

    async def close(self):
        for channel in self.channels.values():
            await channel.close()


@pytest.fixture
async def stubs(stack):
    stubs = Stubs(stack)
    yield stubs
    await stubs.close()
