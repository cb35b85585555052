"""The hostile-RPC suite (tests/support/hostile.py) against the verifier's API, on the real service (relay,
consumer, worker and gRPC server over PostgreSQL and NATS, tests/verifier/conftest.py's ``service``): a refusal
appends nothing."""

import pytest
from kernelboard.v1 import verifier_pb2

from tests.support.hostile import Served, rpc_suite


@pytest.fixture
def hostile_target(log, service) -> Served:
    return Served(service.stub, service.address, lambda _who: service.signed_in, log.head_position)


(
    test_every_rpc_answers_hostile_requests_with_a_documented_status,
    test_every_rpc_refuses_bytes_that_are_not_its_message,
) = rpc_suite("Verifier", verifier_pb2, ["a signed-in caller"], first_message_within_s=1.0)
