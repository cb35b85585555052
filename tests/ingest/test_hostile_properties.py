"""Property tests: hostile requests to every RPC of ingest, against the real service (PostgreSQL, git, auth) that
tests/ingest/conftest.py starts. Each ends with a status its proto documents, never UNKNOWN or INTERNAL, with a short
message; a refusal appends nothing to the log and moves no ref, in PostgreSQL or in git; the service stays SERVING."""

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kernelboard.v1 import ingest_pb2

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
from tests.ingest.test_service import snapshot

ALLOWED = documented_statuses("ingest.proto", "Ingest")
RPCS = {name: shape for name, *shape in rpcs(ingest_pb2, "Ingest")}
CALLERS = st.sampled_from(["alice", "alice/agent-1", "mallory", "curator", "system:scheduler"])


async def refused_writes_nothing(stack, method, call, client_streaming: bool = False) -> None:
    before = await snapshot(stack)
    code, details = await outcome(call)
    assert_documented(method, ALLOWED, code, details, client_streaming)
    if code != grpc.StatusCode.OK:
        assert await snapshot(stack) == before, f"{method} refused ({code.name}) yet wrote: {details[:200]}"


@pytest.mark.parametrize("method", sorted(RPCS))
@HOSTILE_SETTINGS
@given(data=st.data(), who=CALLERS)
async def test_every_rpc_answers_hostile_requests_with_a_documented_status(stack, method, data, who):
    request_class, client_streaming, _server_streaming = RPCS[method]
    request = data.draw(request_for(request_class, client_streaming))
    call = invoke(stack.stub, method, request, client_streaming, stack.md(who))
    await refused_writes_nothing(stack, method, call, client_streaming)
    await assert_serving(f"127.0.0.1:{stack.port}")


@pytest.mark.parametrize("method", sorted(RPCS))
@HOSTILE_SETTINGS
@given(raw=undecodable)
async def test_every_rpc_refuses_bytes_that_are_not_its_message(stack, method, raw):
    _request_class, client_streaming, server_streaming = RPCS[method]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{stack.port}") as channel:
        call = raw_call(
            channel, "kernelboard.v1.Ingest", method, raw, client_streaming, server_streaming, stack.md("alice")
        )
        await refused_writes_nothing(stack, method, call)
