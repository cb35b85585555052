"""Hostile input to the verifier's API (issue 12): a documented status and a short message for each, never UNKNOWN or
INTERNAL, and the server keeps serving. The property tests for every RPC are in test_hostile_properties.py."""

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from kernelboard.v1 import verifier_pb2

SHORT = 1024
INVALID = grpc.StatusCode.INVALID_ARGUMENT


async def refused(call, code: grpc.StatusCode) -> str:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    assert info.value.code() == code, info.value.details()
    assert len(info.value.details()) <= SHORT, f"{len(info.value.details())} characters echoed back"
    return info.value.details()


async def test_bad_fields_are_refused_short(service):
    stub, md = service.stub, service.signed_in
    for check_id in ("c" * 200_000, "00000000-0000-0000-0000-000000000000\n", ""):
        await refused(stub.GetCheck(verifier_pb2.GetCheckRequest(check_id=check_id), metadata=md), INVALID)
    cases = [
        verifier_pb2.ListChecksRequest(route="x" * 3_000_000),
        verifier_pb2.ListChecksRequest(route="fast\n"),
        verifier_pb2.ListChecksRequest(sha="a" * 40 + "\n"),
        verifier_pb2.ListChecksRequest(limit=-1),
        verifier_pb2.ListChecksRequest(limit=2**31 - 1),
    ]
    for request in cases:
        await refused(stub.ListChecks(request, metadata=md), INVALID)
        if request.limit == 0:
            await refused(stub.WatchChecks(request, metadata=md).read(), INVALID)
    async with grpc.aio.insecure_channel(service.address) as channel:
        for method in ("GetCheck", "ListChecks"):
            call = channel.unary_unary(f"/kernelboard.v1.Verifier/{method}")
            await refused(call(b"\xff\xff\xff\xff\x0f", metadata=md), INVALID)
        health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""))
    assert health.status == health_pb2.HealthCheckResponse.SERVING
