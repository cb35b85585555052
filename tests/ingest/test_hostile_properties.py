"""The hostile-RPC suite (tests/support/hostile.py) against ingest, the real service (PostgreSQL, git, auth) that
tests/ingest/conftest.py starts: a refusal appends nothing to the log and moves no ref, in PostgreSQL or in git."""

import pytest
from kernelboard.v1 import ingest_pb2

from tests.support.hostile import Served, rpc_suite
from tests.support.ingest import snapshot


@pytest.fixture
def hostile_target(stack) -> Served:
    return Served(stack.stub, f"127.0.0.1:{stack.port}", stack.md, lambda: snapshot(stack))


(
    test_every_rpc_answers_hostile_requests_with_a_documented_status,
    test_every_rpc_refuses_bytes_that_are_not_its_message,
) = rpc_suite("Ingest", ingest_pb2, ["alice", "alice/agent-1", "mallory", "curator", "system:scheduler"])
