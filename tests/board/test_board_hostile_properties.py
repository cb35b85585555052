"""Property tests: hostile requests to every RPC of the board, on the real server over the scenario's log
(tests/board/conftest.py's ``served``). Each ends with a status its proto documents, never UNKNOWN or INTERNAL, with
a short message; a refusal appends nothing; the server stays SERVING."""

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kernelboard.v1 import board_pb2

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

ALLOWED = documented_statuses("board.proto", "Board")
RPCS = {name: shape for name, *shape in rpcs(board_pb2, "Board")}
CALLERS = st.sampled_from(["curator", "alice"])


async def refused_appends_nothing(log, method, call) -> None:
    before = await log.head_position()
    code, details = await outcome(call, first_message_within_s=1.0)
    assert_documented(method, ALLOWED, code, details)
    if code != grpc.StatusCode.OK:
        assert await log.head_position() == before, f"{method} refused ({code.name}) yet appended"


@pytest.mark.parametrize("method", sorted(RPCS))
@HOSTILE_SETTINGS
@given(data=st.data(), who=CALLERS)
async def test_every_rpc_answers_hostile_requests_with_a_documented_status(served, method, data, who):
    stub, tokens, _projector, log, address = served
    request_class, client_streaming, _server_streaming = RPCS[method]
    request = data.draw(request_for(request_class, client_streaming))
    signed_in = (("authorization", f"Bearer {tokens[who]}"),)
    await refused_appends_nothing(log, method, invoke(stub, method, request, client_streaming, signed_in))
    await assert_serving(address)


@pytest.mark.parametrize("method", sorted(RPCS))
@HOSTILE_SETTINGS
@given(raw=undecodable)
async def test_every_rpc_refuses_bytes_that_are_not_its_message(served, method, raw):
    _stub, tokens, _projector, log, address = served
    _request_class, client_streaming, server_streaming = RPCS[method]
    signed_in = (("authorization", f"Bearer {tokens['alice']}"),)
    async with grpc.aio.insecure_channel(address) as channel:
        call = raw_call(channel, "kernelboard.v1.Board", method, raw, client_streaming, server_streaming, signed_in)
        await refused_appends_nothing(log, method, call)
