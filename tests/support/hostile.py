"""Hostile requests for the property tests of every RPC (issue 12), generated from each request message's descriptor,
and the statuses each RPC documents in its proto's comments ("Statuses: ..."); ``rpc_suite``, the one hostile-RPC
suite, which each service's test module runs against its own running service.

A string field gets well-formed identifiers, the same with a trailing newline, a NUL, a bidi override or a space,
arbitrary text, and huge values (100 KB refs, 3 MB names); numbers their type's extremes (2^62, 3e11, negatives);
enums values outside the enum; bytes random or a bundle header with nothing after it.
"""

import asyncio
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from google.protobuf.descriptor import FieldDescriptor
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

PROTOS = Path(__file__).resolve().parents[2] / "protos" / "kernelboard" / "v1"
# What the protos' service comments say every method may also end with.
EVERY_METHOD = {
    "UNAUTHENTICATED",
    "UNAVAILABLE",
    "DEADLINE_EXCEEDED",
    "CANCELLED",
    "RESOURCE_EXHAUSTED",
    "INVALID_ARGUMENT",
}
NEVER = {grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL}
SHORT_MESSAGE = 1024

# CI-sized: a few dozen requests per RPC, no per-example deadline (a push runs git).
HOSTILE_SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)

WELL_FORMED = [
    "fast",
    "triton",
    "main",
    "checks",
    "routes/triton",
    "refs/heads/main",
    "refs/tags/checks",
    "refs/heads/routes/triton",
    "refs/jobs/1",
    "refs/pull/1/head",
    "alice",
    "alice/agent-1",
    "system:scheduler",
    "1",
    "42",
    "open",
    "merged",
    "active",
    "flawed",
    "0" * 40,
    "00000000-0000-0000-0000-000000000000",
    "routes/triton/bench.sbatch",
]
SUFFIXES = ["", "\n", "\r\n", "\x00", " ", "\t", "\u202e", "/..", "é", "\x7f"]
HUGE = [41, 65, 101, 4097, 100_000, 200_000, 3_000_000]

hostile_strings = st.one_of(
    st.sampled_from(WELL_FORMED),
    st.builds(lambda name, suffix: name + suffix, st.sampled_from(WELL_FORMED), st.sampled_from(SUFFIXES)),
    st.builds(lambda suffix, name: suffix + name, st.sampled_from(SUFFIXES), st.sampled_from(WELL_FORMED)),
    st.text(max_size=60),
    st.builds(lambda char, n: char * n, st.sampled_from(["a", "1", "/", "\n", "é"]), st.sampled_from(HUGE)),
)


def _integers(bits: int, signed: bool) -> st.SearchStrategy[int]:
    low, high = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    edges = [v for v in (0, 1, -1, 2, 99, 2**31 - 1, -(2**31), 2**62, 300_000_000_000, -(2**62)) if low <= v <= high]
    return st.one_of(st.sampled_from(edges + [low, high]), st.integers(low, high))


_SCALARS = {
    FieldDescriptor.TYPE_STRING: hostile_strings,
    FieldDescriptor.TYPE_BOOL: st.booleans(),
    FieldDescriptor.TYPE_INT32: _integers(32, True),
    FieldDescriptor.TYPE_SINT32: _integers(32, True),
    FieldDescriptor.TYPE_INT64: _integers(64, True),
    FieldDescriptor.TYPE_SINT64: _integers(64, True),
    FieldDescriptor.TYPE_UINT32: _integers(32, False),
    FieldDescriptor.TYPE_UINT64: _integers(64, False),
    FieldDescriptor.TYPE_ENUM: _integers(32, True),
    FieldDescriptor.TYPE_DOUBLE: st.floats(),
    FieldDescriptor.TYPE_FLOAT: st.floats(width=32),
    FieldDescriptor.TYPE_BYTES: st.one_of(
        st.binary(max_size=64), st.just(b"# v2 git bundle\n"), st.just(b"# v2 git bundle\n" + b"0" * 40 + b" x\n\n")
    ),
}


def requests(message_class) -> st.SearchStrategy:
    """Request messages of ``message_class`` with every field hostile (or left unset)."""
    fields = {}
    for field in message_class.DESCRIPTOR.fields:
        value = _SCALARS.get(field.type)
        if value is None:
            continue  # a nested message: none of the requests has one
        if field.is_repeated:
            value = st.lists(value, max_size=3)
        fields[field.name] = st.one_of(st.none(), value)

    def build(values: dict):
        return message_class(**{name: value for name, value in values.items() if value is not None})

    return st.fixed_dictionaries(fields).map(build)


undecodable = st.one_of(
    st.binary(min_size=1, max_size=64),
    st.just(b"\xff\xff\xff\xff\x0f"),
    st.just(b"\x0a\x02\xc3\x28"),  # field 1, a string that is not UTF-8
    st.just(b"\x0a\xff\xff\xff\xff\x0f"),  # a length past the end
)


def documented_statuses(proto: str, service: str) -> dict[str, set[str]]:
    """Each RPC of ``service`` in ``protos/kernelboard/v1/<proto>``: the statuses its comment documents, plus OK and
    what every method may end with."""
    text = (PROTOS / proto).read_text()
    body = text[text.index(f"service {service} {{") :]
    body = body[: body.index("\n}")]
    documented, comment = {}, []
    known = set(grpc.StatusCode.__members__)
    for line in body.splitlines():
        stripped = line.strip()
        if stripped.startswith("//"):
            comment.append(stripped[2:])
            continue
        match = re.match(r"rpc (\w+)\(", stripped)
        if match:
            words = " ".join(comment)
            assert "Statuses:" in words, f"{service}.{match[1]} documents no statuses"
            listed = set(re.findall(r"\b[A-Z][A-Z_]+\b", words.split("Statuses:", 1)[1])) & known
            documented[match[1]] = listed | EVERY_METHOD | {"OK"}
        comment = []
    return documented


async def outcome(call, *, first_message_within_s: float = 3.0) -> tuple[grpc.StatusCode, str]:
    """The status a unary call (or a stream's first message, or its end) came to; a stream still open after its
    first message, or silent for ``first_message_within_s``, counts as OK and is cancelled."""
    try:
        if hasattr(call, "read"):
            try:
                await asyncio.wait_for(call.read(), first_message_within_s)
            except TimeoutError:
                pass
            finally:
                call.cancel()
            return grpc.StatusCode.OK, ""
        await call
        return grpc.StatusCode.OK, ""
    except grpc.aio.AioRpcError as err:
        return err.code(), err.details() or ""


# grpc.aio's client sets this status itself (cygrpc's _AioCall.set_internal_error) when sending a request message
# fails because the server has already ended a client-streaming call, e.g. refused a message over its receive limit
# with RESOURCE_EXHAUSTED: the server's status is lost on the client's side, and no server ever sends these words.
# Seen with PushStream and a 6 MB ref under a loaded CI machine; the same call alone reads RESOURCE_EXHAUSTED.
CLIENT_LOST_THE_STATUS = (grpc.StatusCode.INTERNAL, "Internal error from Core")


def assert_documented(
    method: str, allowed: dict[str, set[str]], code: grpc.StatusCode, details: str, client_streaming: bool = False
) -> None:
    if client_streaming and (code, details) == CLIENT_LOST_THE_STATUS:
        return  # the call still ended refused: the caller checks that nothing was written
    assert code not in NEVER, f"{method} ended {code.name}: {details[:300]}"
    assert code.name in allowed[method], f"{method} ended {code.name}, not documented: {details[:300]}"
    assert len(details) <= SHORT_MESSAGE, f"{method}: a {len(details)}-character message"


async def assert_serving(address: str) -> None:
    async with grpc.aio.insecure_channel(address) as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=10)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


def rpcs(pb2_module, service: str) -> list[tuple[str, object, bool, bool]]:
    """(method, request class, client streaming, server streaming) of each RPC of ``service``."""
    found = []
    for method in pb2_module.DESCRIPTOR.services_by_name[service].methods:
        request_class = getattr(pb2_module, method.input_type.name)
        found.append((method.name, request_class, method.client_streaming, method.server_streaming))
    return found


def invoke(stub, method: str, request, client_streaming: bool, metadata):
    """The call object of ``stub.<method>`` with ``request`` (a list of messages for a client stream)."""
    if client_streaming:

        async def messages():
            for message in request:
                yield message

        return getattr(stub, method)(messages(), metadata=metadata)
    return getattr(stub, method)(request, metadata=metadata)


def request_for(request_class, client_streaming: bool) -> st.SearchStrategy:
    return st.lists(requests(request_class), max_size=3) if client_streaming else requests(request_class)


def raw_call(channel, service: str, method: str, raw: bytes, client_streaming: bool, server_streaming: bool, metadata):
    """A call of ``/<service>/<method>`` sending ``raw`` as the request's bytes (no serializer)."""
    path = f"/{service}/{method}"
    if client_streaming:
        return channel.stream_unary(path)(iter([raw]), metadata=metadata)
    if server_streaming:
        return channel.unary_stream(path)(raw, metadata=metadata)
    return channel.unary_unary(path)(raw, metadata=metadata)


# --- the suite: every RPC of one service, hostile requests and undecodable bytes ------------------------------------


@dataclass(frozen=True)
class Served:
    """One running service as the hostile suite sees it: its stub and address, the metadata a caller signs in with,
    and what a refusal must leave as it was (read before and after each call)."""

    stub: object
    address: str
    signed_in: Callable[[str], tuple]
    written: Callable[[], Awaitable[object]]


def rpc_suite(service: str, pb2_module, callers: Sequence[str], *, first_message_within_s: float = 3.0):
    """The two hostile-RPC tests of ``service`` (its proto is ``<service>.proto``), for its test module to name; that
    module gives a fixture ``hostile_target`` returning a ``Served``. Each call ends with a status its proto
    documents, never UNKNOWN or INTERNAL, with a short message; a refusal writes nothing; the service stays
    SERVING."""
    allowed = documented_statuses(f"{service.lower()}.proto", service)
    shapes = {name: shape for name, *shape in rpcs(pb2_module, service)}
    full_name = f"kernelboard.v1.{service}"

    async def refused_writes_nothing(target: Served, method: str, call, client_streaming: bool = False) -> None:
        before = await target.written()
        code, details = await outcome(call, first_message_within_s=first_message_within_s)
        assert_documented(method, allowed, code, details, client_streaming)
        if code != grpc.StatusCode.OK:
            assert await target.written() == before, f"{method} refused ({code.name}) yet wrote: {details[:200]}"

    @pytest.mark.parametrize("method", sorted(shapes))
    @HOSTILE_SETTINGS
    @given(data=st.data(), who=st.sampled_from(list(callers)))
    async def test_every_rpc_answers_hostile_requests_with_a_documented_status(hostile_target, method, data, who):
        request_class, client_streaming, _server_streaming = shapes[method]
        request = data.draw(request_for(request_class, client_streaming))
        call = invoke(hostile_target.stub, method, request, client_streaming, hostile_target.signed_in(who))
        await refused_writes_nothing(hostile_target, method, call, client_streaming)
        await assert_serving(hostile_target.address)

    @pytest.mark.parametrize("method", sorted(shapes))
    @HOSTILE_SETTINGS
    @given(raw=undecodable)
    async def test_every_rpc_refuses_bytes_that_are_not_its_message(hostile_target, method, raw):
        _request_class, client_streaming, server_streaming = shapes[method]
        metadata = hostile_target.signed_in(callers[0])
        async with grpc.aio.insecure_channel(hostile_target.address) as channel:
            call = raw_call(channel, full_name, method, raw, client_streaming, server_streaming, metadata)
            await refused_writes_nothing(hostile_target, method, call)

    return (
        test_every_rpc_answers_hostile_requests_with_a_documented_status,
        test_every_rpc_refuses_bytes_that_are_not_its_message,
    )
