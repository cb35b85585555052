"""The hostile-RPC suite (tests/support/hostile.py) against the scheduler, the real process on the real Slurm (the
stack of tests/scheduler/conftest.py): a refusal appends nothing to the log."""

import pytest
from kernelboard.v1 import scheduler_pb2

from tests.support.hostile import Served, rpc_suite

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(600)]


@pytest.fixture
def hostile_target(stack) -> Served:
    return Served(stack.scheduler, f"127.0.0.1:{stack.process.port}", stack.md, stack.log.head_position)


(
    test_every_rpc_answers_hostile_requests_with_a_documented_status,
    test_every_rpc_refuses_bytes_that_are_not_its_message,
) = rpc_suite("Scheduler", scheduler_pb2, ["alice", "alice/agent-1", "mallory", "curator"])
