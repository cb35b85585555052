"""Property tests: hostile requests to every RPC of the scheduler, the real process on the real Slurm (the stack of
tests/scheduler/conftest.py). Each ends with a status its proto documents, never UNKNOWN or INTERNAL, with a short
message; a refusal appends nothing to the log; the scheduler stays SERVING."""

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kernelboard.v1 import scheduler_pb2

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

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(600)]

ALLOWED = documented_statuses("scheduler.proto", "Scheduler")
RPCS = {name: shape for name, *shape in rpcs(scheduler_pb2, "Scheduler")}
CALLERS = st.sampled_from(["alice", "alice/agent-1", "mallory", "curator"])


async def refused_appends_nothing(stack, method, call) -> None:
    before = await stack.log.head_position()
    code, details = await outcome(call)
    assert_documented(method, ALLOWED, code, details)
    if code != grpc.StatusCode.OK:
        assert await stack.log.head_position() == before, f"{method} refused ({code.name}) yet appended"


@pytest.mark.parametrize("method", sorted(RPCS))
@HOSTILE_SETTINGS
@given(data=st.data(), who=CALLERS)
async def test_every_rpc_answers_hostile_requests_with_a_documented_status(stack, method, data, who):
    request_class, client_streaming, _server_streaming = RPCS[method]
    request = data.draw(request_for(request_class, client_streaming))
    call = invoke(stack.scheduler, method, request, client_streaming, stack.md(who))
    await refused_appends_nothing(stack, method, call)
    await assert_serving(f"127.0.0.1:{stack.process.port}")


@pytest.mark.parametrize("method", sorted(RPCS))
@HOSTILE_SETTINGS
@given(raw=undecodable)
async def test_every_rpc_refuses_bytes_that_are_not_its_message(stack, method, raw):
    _request_class, client_streaming, server_streaming = RPCS[method]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{stack.process.port}") as channel:
        call = raw_call(
            channel, "kernelboard.v1.Scheduler", method, raw, client_streaming, server_streaming, stack.md("alice")
        )
        await refused_appends_nothing(stack, method, call)
