"""Identities, tokens and the auth interceptor, against the real PostgreSQL and event log and a real grpc.aio server."""

import asyncio
import hashlib
import uuid
from datetime import timedelta

import asyncpg
import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from kernelboard.v1 import board_pb2, board_pb2_grpc, scheduler_pb2, scheduler_pb2_grpc
from prometheus_client import REGISTRY

from services.common import auth
from services.common.auth import AGENT, MAINTAINER, MEMBER, PERSON, SERVICE, SIGNED_IN, AuthError
from services.common.eventlog import payload_of
from services.common.grpcserver import start_server
from tests.common.principals import register, token_for
from tests.common.servicers import BOARD, add_all
from tests.common.waiting import sample_reaches


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="module")
async def people(event_log):
    """A maintainer, a member with an agent, an outsider and a service identity, each with a token."""
    names = {
        "maintainer": unique("mia"),
        "member": unique("bob"),
        "outsider": unique("olga"),
        "service": unique("scheduler"),
    }
    await register(event_log, names["maintainer"], role=MAINTAINER)
    await register(event_log, names["member"], role=MEMBER)
    await register(event_log, names["outsider"], role=SIGNED_IN)
    await register(event_log, names["service"], kind=SERVICE, role=MEMBER)
    names["agent"] = f"{names['member']}/agent-1"
    await register(event_log, names["agent"], kind=AGENT, owner=names["member"], role=0)
    names["maintainer_agent"] = f"{names['maintainer']}/bot"
    await register(event_log, names["maintainer_agent"], kind=AGENT, owner=names["maintainer"], role=0)
    tokens = {key: await token_for(event_log, name) for key, name in names.items()}
    return names, tokens


@pytest.fixture(scope="module")
async def server(event_log):
    started = await start_server("test-auth", add_all, port=0, pool=event_log.pool)
    yield started
    await started.stop(0)


@pytest.fixture
async def channel(server):
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        yield channel


def bearer(token: str):
    return (("authorization", f"Bearer {token}"),)


async def get_board(channel, metadata=()):
    return await board_pb2_grpc.BoardStub(channel).GetBoard(board_pb2.GetBoardRequest(version=1), metadata=metadata)


async def refused(call) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


# --- tokens and principals, without gRPC ---


def test_hash_token_is_sha256_hex_and_tokens_carry_256_bits():
    assert auth.hash_token("kb_x") == hashlib.sha256(b"kb_x").hexdigest()
    token = auth.new_token()
    assert token.startswith("kb_") and len(token) == 46 and auth.new_token() != token


async def test_tokens_are_stored_hashed_only(event_log, people):
    names, tokens = people
    rows = await event_log.pool.fetch("SELECT token_hash FROM api_tokens WHERE principal = $1", names["member"])
    assert [row["token_hash"] for row in rows] == [auth.hash_token(tokens["member"])]
    dump = await event_log.pool.fetchval("SELECT string_agg(t::text, ' ') FROM api_tokens t")
    assert tokens["member"] not in dump


async def test_register_appends_principal_registered_in_its_stream(event_log, people):
    names, _ = people
    (event,) = await event_log.read_stream(f"principal:{names['agent']}")
    registered = payload_of(event)
    assert event.type == "PrincipalRegistered" and event.actor == "operator"
    assert (registered.name, registered.owner) == (names["agent"], names["member"])
    assert (registered.kind, registered.role) == (AGENT, MEMBER)


async def test_duplicate_principal_is_refused_and_nothing_is_appended(event_log, people):
    names, _ = people
    head = await event_log.head_position()
    with pytest.raises(auth.PrincipalExists, match="already exists"):
        await register(event_log, names["member"], role=MAINTAINER)
    assert await event_log.head_position() == head
    assert (await auth.get_principal(event_log.pool, names["member"])).role == MEMBER


@pytest.mark.parametrize(
    ("name", "kind", "owner", "role", "message"),
    [
        ("bad name", PERSON, "", MEMBER, "must be letters, digits"),
        ("noowner/agent", AGENT, "noowner", 0, "owner 'noowner' is not registered"),
        ("x/agent", AGENT, "y", 0, "must be named after its owner"),
        ("someone", PERSON, "", 0, "needs a role"),
        ("someone", PERSON, "other", MEMBER, "only agents have an owner"),
    ],
)
async def test_bad_principals_are_refused_with_nothing_written(event_log, name, kind, owner, role, message):
    head = await event_log.head_position()
    with pytest.raises(ValueError, match=message):
        await register(event_log, name, kind=kind, owner=owner, role=role)
    assert await event_log.head_position() == head
    assert await auth.get_principal(event_log.pool, name) is None


async def test_agent_role_is_its_owners_and_agents_cannot_own_agents(event_log, people):
    names, _ = people
    with pytest.raises(ValueError, match="takes its owner's role"):
        await register(event_log, f"{names['member']}/agent-2", kind=AGENT, owner=names["member"], role=MAINTAINER)
    with pytest.raises(ValueError, match="is a service, not a person"):
        await register(event_log, f"{names['service']}/agent", kind=AGENT, owner=names["service"], role=0)


async def test_authenticate_each_failure_says_why(event_log, people):
    names, tokens = people
    assert (await auth.authenticate(event_log.pool, tokens["member"])).name == names["member"]
    with pytest.raises(AuthError, match="malformed token"):
        await auth.authenticate(event_log.pool, "hunter2")
    with pytest.raises(AuthError, match="unknown token"):
        await auth.authenticate(event_log.pool, auth.new_token())
    expired = await token_for(event_log, names["member"], ttl=timedelta(microseconds=1))
    with pytest.raises(AuthError, match="token expired at 20"):
        await auth.authenticate(event_log.pool, expired)
    revoked = await token_for(event_log, names["member"])
    async with event_log.pool.acquire() as conn:
        await auth.revoke_token(conn, revoked)
        await auth.revoke_token(conn, auth.hash_token(revoked))  # again, by hash: no change
        with pytest.raises(AuthError, match="unknown token"):
            await auth.revoke_token(conn, auth.new_token())
    with pytest.raises(AuthError, match="token revoked at 20"):
        await auth.authenticate(event_log.pool, revoked)


async def test_issue_token_for_unknown_principal_or_bad_ttl(event_log, people):
    names, _ = people
    async with event_log.pool.acquire() as conn:
        with pytest.raises(ValueError, match="no principal named 'nobody'"):
            await auth.issue_token(conn, "nobody")
        with pytest.raises(ValueError, match="lifetime must be positive"):
            await auth.issue_token(conn, names["member"], ttl=timedelta(0))


async def test_set_maintainers_follows_the_rules_and_agents_follow_owners(event_log):
    alice, carol = unique("alice"), unique("carol")
    await register(event_log, alice, role=MEMBER)
    await register(event_log, carol, role=MAINTAINER)
    await register(event_log, f"{alice}/bot", kind=AGENT, owner=alice, role=0)
    agent_token = await token_for(event_log, f"{alice}/bot")
    keep = [row["name"] for row in await event_log.pool.fetch("SELECT name FROM principals WHERE role = 3")]
    keep.remove(carol)
    async with event_log.pool.acquire() as conn:
        sync = await auth.set_maintainers(conn, [*keep, alice, "ghost"])
    assert (sync.promoted, sync.demoted, sync.unknown) == ((alice,), (carol,), ("ghost",))
    assert (await auth.authenticate(event_log.pool, agent_token)).role == MAINTAINER
    assert (await auth.get_principal(event_log.pool, carol)).role == MEMBER


async def test_database_refuses_an_agent_without_owner_or_with_a_role(event_log):
    with pytest.raises(asyncpg.CheckViolationError):
        await event_log.pool.execute("INSERT INTO principals (name, kind, owner, role) VALUES ('z/a', 2, 'z/a', NULL)")
    with pytest.raises(asyncpg.ForeignKeyViolationError):
        await event_log.pool.execute("INSERT INTO principals (name, kind, owner, role) VALUES ('y/a', 2, 'y', NULL)")


# --- through a real grpc.aio server ---


async def test_health_and_reflection_stay_open(channel):
    reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=BOARD))
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_protected_call_without_token(channel):
    labels = {"service": BOARD, "method": "GetBoard", "code": "UNAUTHENTICATED"}
    before = REGISTRY.get_sample_value("kb_grpc_requests_total", labels) or 0
    error = await refused(get_board(channel))
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED
    assert error.details().startswith("missing authorization metadata")
    await sample_reaches("kb_grpc_requests_total", labels, before + 1)


async def test_protected_call_with_malformed_header_or_token(channel):
    error = await refused(get_board(channel, (("authorization", "Basic dXNlcjpwYXNz"),)))
    assert (error.code(), error.details()) == (
        grpc.StatusCode.UNAUTHENTICATED,
        "malformed authorization metadata: expected 'Bearer <token>'",
    )
    error = await refused(get_board(channel, bearer("not-a-token")))
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED and error.details().startswith("malformed token")


async def test_protected_call_with_unknown_expired_or_revoked_token(channel, event_log, people):
    names, _ = people
    error = await refused(get_board(channel, bearer(auth.new_token())))
    assert (error.code(), error.details()) == (grpc.StatusCode.UNAUTHENTICATED, "unknown token")

    expired = await token_for(event_log, names["member"], ttl=timedelta(microseconds=1))
    error = await refused(get_board(channel, bearer(expired)))
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED and error.details().startswith("token expired at ")

    revoked = await token_for(event_log, names["member"])
    assert (await get_board(channel, bearer(revoked))).status.startswith(names["member"])
    async with event_log.pool.acquire() as conn:
        await auth.revoke_token(conn, revoked)
    refused_before = REGISTRY.get_sample_value("kb_auth_refused_total", {"reason": "revoked"}) or 0
    error = await refused(get_board(channel, bearer(revoked)))
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED and error.details().startswith("token revoked at ")
    assert REGISTRY.get_sample_value("kb_auth_refused_total", {"reason": "revoked"}) == refused_before + 1


async def test_handler_sees_the_signed_in_principal(channel, people):
    names, tokens = people
    reply = await get_board(channel, bearer(tokens["member"]))
    assert reply.status == f"{names['member']}|{names['member']}|member"


async def test_streaming_handler_sees_the_principal_too(channel, people):
    names, tokens = people
    stream = scheduler_pb2_grpc.SchedulerStub(channel).WatchJob(
        scheduler_pb2.GetJobRequest(job_id="3"), metadata=bearer(tokens["agent"])
    )
    owners = {job.owner async for job in stream}
    assert owners == {f"{names['agent']}|{names['member']}|member"}
    error = await refused(
        scheduler_pb2_grpc.SchedulerStub(channel).WatchJob(scheduler_pb2.GetJobRequest(job_id="3")).read()
    )
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_member_calling_a_maintainer_method_is_denied_with_the_reason(channel, people):
    names, tokens = people
    stub = board_pb2_grpc.BoardStub(channel)
    error = await refused(stub.ListBoards(board_pb2.ListBoardsRequest(), metadata=bearer(tokens["member"])))
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    assert error.details() == f"maintainer role needed to rebuild the board; {names['member']} (member) is not"
    error = await refused(stub.ListBoards(board_pb2.ListBoardsRequest(), metadata=bearer(tokens["outsider"])))
    assert error.details().endswith(f"{names['outsider']} (signed-in) is not")


async def test_agent_acts_for_its_owner(channel, people):
    names, tokens = people
    stub = board_pb2_grpc.BoardStub(channel)
    error = await refused(stub.ListBoards(board_pb2.ListBoardsRequest(), metadata=bearer(tokens["agent"])))
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    assert error.details().endswith(f"{names['agent']} (agent of {names['member']}, member) is not")
    reply = await stub.ListBoards(board_pb2.ListBoardsRequest(), metadata=bearer(tokens["maintainer_agent"]))
    assert reply.boards[0].status == f"{names['maintainer_agent']}|{names['maintainer']}|maintainer"


async def test_principal_does_not_leak_between_concurrent_calls(channel, people):
    names, tokens = people
    keys = ["member", "agent", "outsider", "maintainer"] * 10
    replies = await asyncio.gather(*(get_board(channel, bearer(tokens[key])) for key in keys))
    assert [reply.status.split("|")[0] for reply in replies] == [names[key] for key in keys]


async def test_open_methods_add_to_health_and_reflection(event_log, people):
    names, tokens = people
    started = await start_server("test-open", add_all, port=0, pool=event_log.pool, open_methods={f"/{BOARD}/GetBoard"})
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{started.port}") as channel:
            assert (await get_board(channel)).status == "open"
            health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
            assert health.status == health_pb2.HealthCheckResponse.SERVING
            error = await refused(board_pb2_grpc.BoardStub(channel).ListBoards(board_pb2.ListBoardsRequest()))
            assert error.code() == grpc.StatusCode.UNAUTHENTICATED
    finally:
        await started.stop(0)


async def test_list_tokens_shows_each_state_newest_first(event_log):
    name = unique("tess")
    await register(event_log, name)
    live = await token_for(event_log, name)
    expired = await token_for(event_log, name, ttl=timedelta(microseconds=1))
    revoked = await token_for(event_log, name)
    async with event_log.pool.acquire() as conn:
        await auth.revoke_token(conn, revoked)
        listed = await auth.list_tokens(conn, name)
    assert [(token.token_hash, token.state) for token in listed] == [
        (auth.hash_token(revoked), "revoked"),
        (auth.hash_token(expired), "expired"),
        (auth.hash_token(live), "live"),
    ]
