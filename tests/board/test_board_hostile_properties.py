"""The hostile-RPC suite (tests/support/hostile.py) against the board, on the real server over the scenario's log
(tests/board/conftest.py's ``served``): a refusal appends nothing."""

import pytest
from kernelboard.v1 import board_pb2

from tests.support.hostile import Served, rpc_suite


@pytest.fixture
def hostile_target(served) -> Served:
    stub, tokens, _projector, log, address = served
    return Served(stub, address, lambda who: (("authorization", f"Bearer {tokens[who]}"),), log.head_position)


(
    test_every_rpc_answers_hostile_requests_with_a_documented_status,
    test_every_rpc_refuses_bytes_that_are_not_its_message,
) = rpc_suite("Board", board_pb2, ["alice", "curator"], first_message_within_s=1.0)
