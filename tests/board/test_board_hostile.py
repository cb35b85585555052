"""Hostile input to the board (issue 12): a documented status and a short message for each, never UNKNOWN or
INTERNAL, nothing appended by a refusal, the server serving after; and a start, a catch-up or a rebuild that meets an
event it cannot fold sets it aside and goes on. The property tests for every RPC are in
test_board_hostile_properties.py."""

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from kernelboard.v1 import board_pb2, events_pb2
from prometheus_client import REGISTRY

from services.board.projector import Projector
from services.common.eventlog import NewEvent

from .board_events import append_all, scenario

SHORT = 1024
INVALID = grpc.StatusCode.INVALID_ARGUMENT


def md(tokens, who: str = "curator"):
    return (("authorization", f"Bearer {tokens[who]}"),)


async def refused(log, call, code: grpc.StatusCode) -> str:
    before = await log.head_position()
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    assert info.value.code() == code, info.value.details()
    assert len(info.value.details()) <= SHORT, f"{len(info.value.details())} characters echoed back"
    assert await log.head_position() == before, "a refused request appended to the log"
    return info.value.details()


async def test_bad_fields_are_refused_short(served):
    stub, tokens, _projector, log, address = served
    signed_in = md(tokens)
    cases = [
        stub.GetRoute(board_pb2.GetBoardRouteRequest(route="r" * 3_000_000), metadata=signed_in),
        stub.GetRoute(board_pb2.GetBoardRouteRequest(route="fast\n"), metadata=signed_in),
        stub.GetBoard(board_pb2.GetBoardRequest(version=-1), metadata=signed_in),
        stub.AdoptRoute(board_pb2.AdoptRouteRequest(route="fast\n", adopted=True), metadata=signed_in),
        stub.AdoptRoute(board_pb2.AdoptRouteRequest(route="fast", note="n" * 200_000), metadata=signed_in),
        stub.AdoptRoute(board_pb2.AdoptRouteRequest(route="fast", note="a\x00b"), metadata=signed_in),
        stub.SetBenchmarkStatus(board_pb2.SetBenchmarkStatusRequest(status="flawed\n", reason="x"), metadata=signed_in),
        stub.SetBenchmarkStatus(
            board_pb2.SetBenchmarkStatusRequest(status="flawed", reason="r" * 200_000), metadata=signed_in
        ),
        stub.SetBenchmarkStatus(board_pb2.SetBenchmarkStatusRequest(status="s" * 200_000), metadata=signed_in),
    ]
    for call in cases:
        await refused(log, call, INVALID)
    async with grpc.aio.insecure_channel(address) as channel:
        for method in ("GetBoard", "AdoptRoute", "SetBenchmarkStatus"):
            call = channel.unary_unary(f"/kernelboard.v1.Board/{method}")
            await refused(log, call(b"\xff\xff\xff\xff\x0f", metadata=signed_in), INVALID)
        health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""))
    assert health.status == health_pb2.HealthCheckResponse.SERVING


async def test_the_board_starts_and_rebuilds_past_an_event_it_cannot_fold(fresh_log):
    # A report on a board numbered -3, as a hand or an older writer could append it: its row cannot be stored
    # (board_rows.version > 0), and the board used to fail its start on it, every time.
    await append_all(fresh_log, scenario())
    bad = events_pb2.MetricsReported(route="fast", sha="1" * 40, score=9.0, benchmark_version=-3, reporter="x")
    await fresh_log.append("route:fast", None, [NewEvent(bad, actor="old-code")])
    await append_all(fresh_log, scenario(start_minute=500)[-2:])  # events after it fold as ever
    projector = Projector(fresh_log)
    await projector.start()
    assert -3 not in projector.versions()
    assert projector.state.position == await fresh_log.head_position()
    assert REGISTRY.get_sample_value("kb_records_set_aside", {"step": "board_fold"}) >= 1
    rebuilt = await projector.rebuild()
    assert rebuilt.log_position == await fresh_log.head_position() and -3 not in projector.versions()
    again = Projector(fresh_log)
    await again.start()  # from the stored copy this time
    assert again.versions() == projector.versions()
