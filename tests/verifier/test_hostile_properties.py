"""Property tests: hostile requests to every RPC of the verifier's API, on the real service (relay, consumer, worker
and gRPC server over PostgreSQL and NATS, as tests/verifier/test_service.py starts them). Each ends with a status its
proto documents, never UNKNOWN or INTERNAL, with a short message; a refusal appends nothing; the server stays
SERVING."""

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kernelboard.v1 import verifier_pb2

from tests.common.hostile import (
    HOSTILE_SETTINGS,
    assert_documented,
    assert_serving,
    documented_statuses,
    invoke,
    outcome,
    raw_call,
    request_for,
    rpcs,
    undecodable,
)
from tests.verifier.test_service import service  # noqa: F401 - the fixture

ALLOWED = documented_statuses("verifier.proto", "Verifier")
RPCS = {name: shape for name, *shape in rpcs(verifier_pb2, "Verifier")}


async def refused_appends_nothing(log, method, call) -> None:
    before = await log.head_position()
    code, details = await outcome(call, first_message_within_s=1.0)
    assert_documented(method, ALLOWED, code, details)
    if code != grpc.StatusCode.OK:
        assert await log.head_position() == before, f"{method} refused ({code.name}) yet appended"


@pytest.mark.parametrize("method", sorted(RPCS))
@HOSTILE_SETTINGS
@given(data=st.data())
async def test_every_rpc_answers_hostile_requests_with_a_documented_status(log, service, method, data):  # noqa: F811
    request_class, client_streaming, _server_streaming = RPCS[method]
    request = data.draw(request_for(request_class, client_streaming))
    await refused_appends_nothing(
        log, method, invoke(service.stub, method, request, client_streaming, service.signed_in)
    )
    await assert_serving(service.address)


@pytest.mark.parametrize("method", sorted(RPCS))
@HOSTILE_SETTINGS
@given(raw=undecodable)
async def test_every_rpc_refuses_bytes_that_are_not_its_message(log, service, method, raw):  # noqa: F811
    _request_class, client_streaming, server_streaming = RPCS[method]
    async with grpc.aio.insecure_channel(service.address) as channel:
        call = raw_call(
            channel, "kernelboard.v1.Verifier", method, raw, client_streaming, server_streaming, service.signed_in
        )
        await refused_appends_nothing(log, method, call)
