"""Hostile input to ingest, each case as it was tried on a stack (issue 12): every one ends with a documented status
and a short message, writes nothing, and leaves the service serving. The property tests for every RPC are in
tests/ingest/test_hostile_properties.py."""

import hashlib
import struct
import zlib

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from kernelboard.v1 import ingest_pb2, ingest_pb2_grpc
from prometheus_client import REGISTRY

from services.common import auth
from services.common.grpcserver import start_server
from services.ingest import store
from services.ingest.api import add_to_server
from services.ingest.app import Ingest
from services.ingest.gitrepo import HostedRepo
from tests.ingest.conftest import MAX_BUNDLE_BYTES
from tests.ingest.gitwork import WorkClone
from tests.support.ingest import clone, push, refused, snapshot, start_route

SHORT = 1024  # no refusal message may be longer: a message echoing its input fails on the client instead


def hand_made_bundle(work: WorkClone, ref: str, commit: str, base: str, objects: list[str]) -> bytes:
    """A v2 bundle of ``commit`` (building on ``base``) whose pack holds ``commit`` and ``objects`` as they are."""
    types = {"commit": 1, "tree": 2, "blob": 3}
    entries = []
    for sha in [commit, *objects]:
        kind = work.git("cat-file", "-t", sha).decode().strip()
        body = work.git("cat-file", kind, sha)
        size, header = len(body), []
        byte = (types[kind] << 4) | (size & 0x0F)
        size >>= 4
        while size:
            header.append(byte | 0x80)
            byte, size = size & 0x7F, size >> 7
        header.append(byte)
        entries.append(bytes(header) + zlib.compress(body))
    pack = b"PACK" + struct.pack(">II", 2, len(entries)) + b"".join(entries)
    pack += hashlib.sha1(pack).digest()
    return f"# v2 git bundle\n-{base}\n{commit} {ref}\n\n".encode() + pack


async def short_refusal(stack, call, code: grpc.StatusCode) -> str:
    details = await refused(stack, call, code, "")
    assert len(details) <= SHORT, f"{len(details)} characters echoed back"
    return details


async def serving(stack) -> None:
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{stack.port}")
    async with channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""))
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_route_name_with_a_trailing_newline_is_refused_and_routes_keep_working(stack, tmp_path):
    # The attack: "x-y\n" passed `^...$`, was committed to PostgreSQL, and git refused the ref; from then on every
    # StartRoute, Push and Fetch ended UNKNOWN.
    details = await short_refusal(stack, start_route(stack, "mallory", "x-y\n"), grpc.StatusCode.INVALID_ARGUMENT)
    assert "route" in details
    for bad in ("x-y\r", "x-y\x00", "x\ny", " x-y", "x-y "):
        await short_refusal(stack, start_route(stack, "mallory", bad), grpc.StatusCode.INVALID_ARGUMENT)
    assert "refs/heads/routes/x-y\n" not in await store.ref_values(stack.log.pool)
    await start_route(stack, "mallory", "after-newline")
    work = await clone(stack, "mallory", "routes/after-newline", tmp_path / "w")
    base = work.head()
    work.commit({"routes/after-newline/a.py": "x = 1\n"})
    await push(stack, "mallory", "routes/after-newline", work.bundle("refs/heads/routes/after-newline", base))
    await stack.stub.Fetch(ingest_pb2.FetchRequest(), metadata=stack.md("mallory"))
    await serving(stack)


async def test_huge_identifiers_come_back_short(stack):
    await short_refusal(
        stack,
        push(stack, "alice", "refs/heads/routes/" + "a" * 100_000, b"# v2 git bundle\n"),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    await short_refusal(stack, start_route(stack, "alice", "r" * 3_000_000), grpc.StatusCode.INVALID_ARGUMENT)
    await short_refusal(
        stack,
        stack.stub.GetRoute(ingest_pb2.GetRouteRequest(route="g" * 200_000), metadata=stack.md("alice")),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    await short_refusal(
        stack,
        stack.stub.Fetch(ingest_pb2.FetchRequest(refs=["refs/jobs/" + "1" * 200_000]), metadata=stack.md("alice")),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    await serving(stack)


async def test_agent_and_person_names_are_matched_in_full(stack):
    # `name/nl\n` was registered on the live stack.
    for name in ("alice/nl\n", "alice/a\x00", "bob\n", "alice/" + "a" * 100_000):
        details = await short_refusal(
            stack,
            stack.stub.CreateToken(ingest_pb2.CreateTokenRequest(name=name), metadata=stack.md("curator")),
            grpc.StatusCode.INVALID_ARGUMENT,
        )
        assert "name" in details
    await serving(stack)


@pytest.mark.parametrize("ttl", [2**62, 300_000_000_000, -1, 2**63 - 1, -(2**63)])
async def test_token_lifetimes_out_of_range(stack, ttl):
    details = await short_refusal(
        stack,
        stack.stub.CreateToken(ingest_pb2.CreateTokenRequest(ttl_seconds=ttl), metadata=stack.md("alice")),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert "ttl_seconds" in details


async def test_bad_enums_and_numbers(stack):
    md = stack.md("curator")
    cases = [
        stack.stub.CreateToken(ingest_pb2.CreateTokenRequest(name="newbie", kind=77), metadata=md),
        stack.stub.Review(ingest_pb2.ReviewRequest(number=1, verdict=99), metadata=md),
        stack.stub.Review(ingest_pb2.ReviewRequest(number=-5, verdict=1), metadata=md),
        stack.stub.Merge(ingest_pb2.MergeRequest(number=2**62), metadata=md),
        stack.stub.ListPullRequests(ingest_pb2.ListPullRequestsRequest(state="closed\n"), metadata=md),
        stack.stub.OpenPullRequest(ingest_pb2.OpenPullRequestRequest(route="triton", title="t\x00"), metadata=md),
    ]
    for call in cases:
        await short_refusal(stack, call, grpc.StatusCode.INVALID_ARGUMENT)
    await serving(stack)


async def test_a_tree_entry_with_an_empty_name_is_refused(stack, tmp_path):
    await start_route(stack, "bob", "empty-entry")
    work = await clone(stack, "bob", "routes/empty-entry", tmp_path / "e")
    base = work.head()
    blob = work.git("hash-object", "-w", "--stdin", input=b"x = 1\n").decode().strip()
    # git mktree refuses an empty name; a hand-made tree object is what a hostile client sends.
    empty_named = (
        work.git(
            "hash-object", "-w", "-t", "tree", "--literally", "--stdin", input=b"100644 \x00" + bytes.fromhex(blob)
        )
        .decode()
        .strip()
    )
    root = work.git("mktree", input=f"040000 tree {empty_named}\troutes\n".encode()).decode().strip()
    commit = work.git("commit-tree", root, "-p", base, "-m", "empty name").decode().strip()
    # git's own bundle and pack-objects refuse such a tree too: the pack is written by hand.
    bundle = hand_made_bundle(work, "refs/heads/routes/empty-entry", commit, base, [root, empty_named, blob])
    await short_refusal(stack, push(stack, "bob", "routes/empty-entry", bundle), grpc.StatusCode.INVALID_ARGUMENT)
    await serving(stack)


async def test_an_undecodable_request_is_invalid_argument(stack):
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{stack.port}")
    async with channel:
        for method in ("StartRoute", "Push", "CreateToken", "RevokeToken"):
            call = channel.unary_unary(f"/kernelboard.v1.Ingest/{method}")  # raw bytes, no serializer
            before = await snapshot(stack)
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await call(b"\xff\xff\xff\xff\x0f", metadata=stack.md("alice"))
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (method, info.value.details())
            assert await snapshot(stack) == before
        # a string field holding bytes that are not UTF-8
        call = channel.unary_unary("/kernelboard.v1.Ingest/StartRoute")
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await call(b"\x0a\x02\xc3\x28", metadata=stack.md("alice"))
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        stream = channel.stream_unary("/kernelboard.v1.Ingest/PushStream")
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stream(iter([b"\xff\xff\xff"]), metadata=stack.md("alice"))
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    await serving(stack)


async def test_revoke_token_says_the_same_for_not_yours_and_no_such_token(stack):
    async def revoke(who: str, token: str) -> tuple[grpc.StatusCode, str]:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stack.stub.RevokeToken(ingest_pb2.RevokeTokenRequest(token=token), metadata=stack.md(who))
        return info.value.code(), info.value.details()

    bobs = (
        await stack.stub.CreateToken(ingest_pb2.CreateTokenRequest(name="bob/agent-1"), metadata=stack.md("bob"))
    ).token
    made_up = "kb_" + "A" * 43
    not_yours = await revoke("mallory", bobs)
    no_such = await revoke("mallory", made_up)
    assert not_yours == no_such
    assert not_yours[0] == grpc.StatusCode.NOT_FOUND
    assert "bob" not in not_yours[1]
    assert await revoke("mallory", "not even a token") == no_such
    # a revoked token of someone else reads the same as well
    await stack.stub.RevokeToken(ingest_pb2.RevokeTokenRequest(token=bobs), metadata=stack.md("bob"))
    assert await revoke("mallory", bobs) == no_such
    # the token's own person still revokes it, and a maintainer any
    alices = (await stack.stub.CreateToken(ingest_pb2.CreateTokenRequest(), metadata=stack.md("alice"))).token
    reply = await stack.stub.RevokeToken(ingest_pb2.RevokeTokenRequest(token=alices), metadata=stack.md("curator"))
    assert reply.principal == "alice"


async def test_bad_input_to_push_stream(stack, tmp_path):
    async def chunks(*items):
        for item in items:
            yield item

    md = stack.md("alice")
    await short_refusal(
        stack,
        stack.stub.PushStream(chunks(ingest_pb2.PushChunk(ref="routes/x\n", data=b"# v2 git bundle\n")), metadata=md),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    await short_refusal(stack, stack.stub.PushStream(chunks(), metadata=md), grpc.StatusCode.INVALID_ARGUMENT)
    await serving(stack)


async def test_ingest_starts_with_a_bad_ref_row_set_aside(stack, tmp_path):
    # What the old code committed for StartRoute("x-y\n"), and a ref whose commit the repository lacks: each made
    # every later start fail in the reconcile. Written straight into PostgreSQL, as the old code did.
    bad = {"refs/heads/routes/x-y\n": "1" * 40, "refs/heads/routes/lost": "2" * 40}
    async with stack.log.pool.acquire() as conn:
        for ref, sha in bad.items():
            await conn.execute("INSERT INTO ingest_refs (ref, sha, updated_by) VALUES ($1, $2, 'old-code')", ref, sha)
        await conn.execute(
            "INSERT INTO ingest_routes (route, owner, started_by, base_sha) VALUES ('x-y\n', 'mallory', 'mallory', $1)",
            "1" * 40,
        )
    before = REGISTRY.get_sample_value("kb_records_set_aside", {"step": "ingest_reconcile"}) or 0
    restarted = Ingest(stack.log, HostedRepo(stack.home / "repo.git"), max_bundle_bytes=MAX_BUNDLE_BYTES)
    await restarted.start()
    try:
        recorded = await store.ref_values(stack.log.pool)
        assert not set(bad) & set(recorded)
        assert await restarted.repo.refs() == recorded
        async with stack.log.pool.acquire() as conn:
            aside = {r["ref"]: r["reason"] for r in await conn.fetch("SELECT ref, reason FROM ingest_refs_set_aside")}
        assert set(bad) <= set(aside)
        assert "not a well-formed hosted ref" in aside["refs/heads/routes/x-y\n"]
        assert "not a commit" in aside["refs/heads/routes/lost"]
        assert REGISTRY.get_sample_value("kb_records_set_aside", {"step": "ingest_reconcile"}) >= before + 3
        assert "x-y\n" not in {route.route for route in await store.list_routes(stack.log.pool)}
        # and the service it restarted serves routes, pushes and fetches
        started = await start_server(
            "ingest", lambda server: add_to_server(server, restarted), port=0, pool=stack.log.pool
        )
        async with grpc.aio.insecure_channel(f"127.0.0.1:{started.port}") as channel:
            stub = ingest_pb2_grpc.IngestStub(channel)
            await stub.StartRoute(ingest_pb2.StartRouteRequest(route="after-restart"), metadata=stack.md("bob"))
            reply = await stub.Fetch(ingest_pb2.FetchRequest(refs=["routes/after-restart"]), metadata=stack.md("bob"))
            assert reply.bundle
            health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""))
            assert health.status == health_pb2.HealthCheckResponse.SERVING
        await started.stop(0)
    finally:
        await restarted.stop()


async def test_operators_cannot_register_a_name_with_a_trailing_newline_either(stack):
    # `kb admin user` registers through auth.register_principal, as CreateToken does: the grammar is matched in full
    # there too.
    async with stack.log.pool.acquire() as conn:
        cases = (("carol\n", auth.PERSON, "", auth.MEMBER), ("alice/nl\n", auth.AGENT, "alice", 0))
        for name, kind, owner, role in cases:
            with pytest.raises(ValueError):
                await auth.register_principal(conn, name, kind, owner, role, log=stack.log, actor="test")
            assert await auth.get_principal(conn, name) is None
