"""The server scaffolding on a real grpc.aio server (port 0): health, reflection, every RPC shape, metrics, shutdown."""

import asyncio
import contextlib

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from kernelboard.v1 import board_pb2, board_pb2_grpc, scheduler_pb2, scheduler_pb2_grpc, verifier_pb2, verifier_pb2_grpc
from prometheus_client import REGISTRY

from services.common.grpcserver import start_server
from services.common.handlers import HandlerWrappers
from tests.common.servicers import BOARD, SCHEDULER, SLOW_VERSION_BASE, VERIFIER, add_all
from tests.common.waiting import sample_reaches

SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING


@pytest.fixture(scope="module")
async def server():
    started = await start_server("test", add_all, port=0)
    yield started
    await started.stop(0)


@pytest.fixture
async def channel(server):
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        yield channel


def count(service: str, method: str, code: str) -> float:
    labels = {"service": service, "method": method, "code": code}
    return REGISTRY.get_sample_value("kb_grpc_requests_total", labels) or 0.0


async def test_start_server_unpacks_as_server_and_port(server):
    grpc_server, port = server
    assert isinstance(grpc_server, grpc.aio.Server) and port > 0


async def test_health_serving_for_every_service_and_the_server(channel):
    health = health_pb2_grpc.HealthStub(channel)
    for name in ("", BOARD, SCHEDULER, VERIFIER):
        reply = await health.Check(health_pb2.HealthCheckRequest(service=name))
        assert reply.status == SERVING, name
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await health.Check(health_pb2.HealthCheckRequest(service="kernelboard.v1.Nothing"))
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


async def test_reflection_lists_the_services(channel):
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)

    async def requests():
        yield reflection_pb2.ServerReflectionRequest(list_services="")
        yield reflection_pb2.ServerReflectionRequest(file_containing_symbol=BOARD)

    replies = [reply async for reply in stub.ServerReflectionInfo(requests())]
    listed = {service.name for service in replies[0].list_services_response.service}
    assert {BOARD, SCHEDULER, VERIFIER, "grpc.health.v1.Health"} <= listed
    assert replies[1].file_descriptor_response.file_descriptor_proto  # the Board's .proto, for grpcurl and friends


async def test_unary_call_is_counted_and_timed(channel):
    before = count(BOARD, "GetBoard", "OK")
    latency_before = (
        REGISTRY.get_sample_value("kb_grpc_request_duration_seconds_count", {"service": BOARD, "method": "GetBoard"})
        or 0.0
    )
    reply = await board_pb2_grpc.BoardStub(channel).GetBoard(board_pb2.GetBoardRequest(version=3))
    assert reply.version == 3 and reply.status == "open"
    assert count(BOARD, "GetBoard", "OK") == before + 1
    latency_after = REGISTRY.get_sample_value(
        "kb_grpc_request_duration_seconds_count", {"service": BOARD, "method": "GetBoard"}
    )
    assert latency_after == latency_before + 1
    assert REGISTRY.get_sample_value("kb_grpc_in_flight", {"service": BOARD}) == 0


async def test_abort_keeps_its_code_and_message_and_is_counted_by_it(channel):
    before = count(BOARD, "GetBoard", "INVALID_ARGUMENT")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await board_pb2_grpc.BoardStub(channel).GetBoard(board_pb2.GetBoardRequest(version=-2))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details() == "version must be >= 0, got -2"
    labels = {"service": BOARD, "method": "GetBoard", "code": "INVALID_ARGUMENT"}
    await sample_reaches("kb_grpc_requests_total", labels, before + 1)


async def test_handler_crash_is_unknown(channel):
    before = count(BOARD, "GetBoard", "UNKNOWN")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await board_pb2_grpc.BoardStub(channel).GetBoard(board_pb2.GetBoardRequest(version=99))
    assert caught.value.code() == grpc.StatusCode.UNKNOWN
    assert count(BOARD, "GetBoard", "UNKNOWN") == before + 1


async def test_server_streaming_async_generator(channel):
    before = count(SCHEDULER, "WatchJob", "OK")
    jobs = [
        job async for job in scheduler_pb2_grpc.SchedulerStub(channel).WatchJob(scheduler_pb2.GetJobRequest(job_id="7"))
    ]
    assert [(job.job_id, job.state) for job in jobs] == [("7", "PENDING"), ("7", "RUNNING"), ("7", "COMPLETED")]
    assert count(SCHEDULER, "WatchJob", "OK") == before + 1


async def test_server_streaming_with_context_write(channel):
    checks = [
        c async for c in verifier_pb2_grpc.VerifierStub(channel).WatchChecks(verifier_pb2.ListChecksRequest(route="r"))
    ]
    assert [(check.route, check.state) for check in checks] == [("r", "queued"), ("r", "passed")]


async def test_unimplemented_method_is_unimplemented(channel):
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await scheduler_pb2_grpc.SchedulerStub(channel).GetJob(scheduler_pb2.GetJobRequest(job_id="1"))
    assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED


async def test_stop_goes_not_serving_first_then_lets_running_calls_finish():
    started = await start_server("test-stop", add_all, port=0)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{started.port}") as channel:
        watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=BOARD))
        assert (await watch.read()).status == SERVING
        slow = asyncio.ensure_future(
            board_pb2_grpc.BoardStub(channel).GetBoard(board_pb2.GetBoardRequest(version=SLOW_VERSION_BASE + 700))
        )
        await asyncio.sleep(0.2)  # the slow call is in flight
        stopping = asyncio.ensure_future(started.stop(grace=5))
        assert (await asyncio.wait_for(watch.read(), 2)).status == NOT_SERVING
        assert (await asyncio.wait_for(slow, 5)).version == SLOW_VERSION_BASE + 700
        await asyncio.wait_for(stopping, 6)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await board_pb2_grpc.BoardStub(channel).GetBoard(board_pb2.GetBoardRequest(version=1), timeout=1)
        assert caught.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


async def test_port_in_use_is_a_clear_error(server):
    with pytest.raises(OSError, match=rf"second: cannot listen for gRPC on 127.0.0.1:{server.port} \(in use\?\)"):
        await start_server("second", add_all, port=server.port)


def test_a_handler_is_wrapped_once_while_the_chain_gives_back_the_same_one():
    arounds_built = []

    def around_for(full_method):
        arounds_built.append(full_method)
        return contextlib.nullcontext

    wrappers = HandlerWrappers(around_for)
    handler = grpc.unary_unary_rpc_method_handler(lambda request, context: request)
    first = wrappers.wrap("/s/M", handler)
    assert wrappers.wrap("/s/M", handler) is first and first is not handler
    replaced = grpc.unary_unary_rpc_method_handler(lambda request, context: request)
    assert wrappers.wrap("/s/M", replaced) is not first  # a chain that builds a new handler gets a new wrapper
    assert arounds_built == ["/s/M", "/s/M"]
