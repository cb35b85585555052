"""The auth interceptor's token cache, against the real PostgreSQL and a real grpc.aio server: hits and misses,
the kb_auth_changed notices (a revocation, a moved expiry, an owner's role, a truncated table), expiry on the clock
while cached, the listener lost and back (calls bypass the cache and stay right), and the listener's lifecycle."""

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import grpc
import pytest
from kernelboard.v1 import board_pb2, board_pb2_grpc
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from contracts.access import Actor
from services.common import auth, token_cache
from services.common.auth import AGENT, MAINTAINER, MEMBER, PERSON, SERVICE, AuthError, SignIn
from services.common.eventlog import EventLog
from services.common.grpcserver import start_server
from services.common.token_cache import TokenCache
from tests.common.principals import register, token_for
from tests.common.servicers import add_all
from tests.common.waiting import eventually
from tests.support.databases import ADMIN_URL, throwaway_database

NOTICE_WAIT_S = 2.0  # how long a notice may take to reach the cache


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def lookups(result: str) -> float:
    return REGISTRY.get_sample_value("kb_auth_token_cache_lookups_total", {"result": result}) or 0.0


def counts() -> dict[str, float]:
    return {result: lookups(result) for result in ("hit", "miss", "bypass")}


def listeners_connected() -> float:
    return REGISTRY.get_sample_value("kb_auth_listener_connected") or 0.0


def refused_count(reason: str) -> float:
    return REGISTRY.get_sample_value("kb_auth_refused_total", {"reason": reason}) or 0.0


async def revoke(event_log, token: str) -> None:
    async with event_log.pool.acquire() as conn:
        await auth.revoke_token(conn, token)


async def listener_backends(pool) -> list[int]:
    return [
        row["pid"]
        for row in await pool.fetch(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1",
            token_cache.LISTENER_APPLICATION_NAME,
        )
    ]


def listener_tasks() -> list[asyncio.Task]:
    return [task for task in asyncio.all_tasks() if task.get_name() == "kb-auth-listener"]


@pytest.fixture(scope="module")
async def server(event_log):
    before = listeners_connected()
    started = await start_server("test-auth-cache", add_all, port=0, pool=event_log.pool)
    await eventually(lambda: listeners_connected() == before + 1, "the server's auth listener connected")
    yield started
    await started.stop(0)


@pytest.fixture
async def board(server):
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        yield board_pb2_grpc.BoardStub(channel)


async def caller(board, token: str) -> str:
    """``name|owner|role`` as the handler sees the caller."""
    reply = await board.GetBoard(board_pb2.GetBoardRequest(version=1), metadata=(("authorization", f"Bearer {token}"),))
    return reply.status


async def refusal(board, token: str) -> grpc.aio.AioRpcError | None:
    """The call's UNAUTHENTICATED error, or None when it was signed in."""
    try:
        await caller(board, token)
    except grpc.aio.AioRpcError as err:
        assert err.code() == grpc.StatusCode.UNAUTHENTICATED, err
        return err
    return None


# --- the cache itself ---


def sign_in(name: str, owner: str | None = None) -> SignIn:
    return SignIn(Actor(name, AGENT if owner else PERSON, owner or name, MEMBER), None)


def trusted_cache(max_size: int = 10) -> TokenCache:
    cache = TokenCache(max_size)
    cache.set_trusted(True)
    return cache


def test_the_cache_keeps_the_most_recently_used_sign_ins_up_to_its_size():
    cache = trusted_cache(max_size=2)
    for key in "abc"[:2]:
        assert cache.put(key, sign_in(key), cache.generation)
    assert cache.get("a") is not None  # a is now more recent than b
    assert cache.put("c", sign_in("c"), cache.generation)
    assert (len(cache), cache.get("b"), cache.get("a").principal.name) == (2, None, "a")
    cache.drop_principal("b")  # its index entry went with it: nothing left to drop, nothing fails
    assert len(cache) == 2


def test_dropping_a_principal_drops_its_agents_and_nobody_else():
    cache = trusted_cache()
    cache.put("alice", sign_in("alice"), cache.generation)
    cache.put("alice-bot", sign_in("alice/bot", owner="alice"), cache.generation)
    cache.put("bob-bot", sign_in("bob/bot", owner="bob"), cache.generation)
    cache.drop_principal("alice")
    assert [key for key in ("alice", "alice-bot", "bob-bot") if cache.get(key)] == ["bob-bot"]
    cache.drop_principal("bob/bot")
    assert len(cache) == 0


def test_a_lookup_that_a_notice_overtook_or_made_while_untrusted_is_not_kept():
    cache = trusted_cache()
    started = cache.generation
    cache.drop_token("someone-elses")  # a notice arrives while the lookup reads PostgreSQL
    assert not cache.put("t", sign_in("alice"), started) and cache.get("t") is None
    assert cache.put("t", sign_in("alice"), cache.generation)
    untrusted = TokenCache()
    assert not untrusted.put("t", sign_in("alice"), untrusted.generation)
    started = untrusted.generation  # a lookup starts while the listener is down and ends once it listens
    untrusted.set_trusted(True)
    assert not untrusted.put("t", sign_in("alice"), started)
    cache.set_trusted(False)  # the listener lost: the cache starts empty when it is trusted again
    assert len(cache) == 0 and not cache.put("t", sign_in("alice"), cache.generation)


# --- through a real server ---


async def test_a_second_call_is_a_hit_and_refusals_are_never_cached(event_log, board):
    name = unique("hana")
    await register(event_log, name)
    token = await token_for(event_log, name)
    before = counts()
    assert await caller(board, token) == f"{name}|{name}|member"
    assert await caller(board, token) == f"{name}|{name}|member"
    assert counts() == {**before, "miss": before["miss"] + 1, "hit": before["hit"] + 1}

    unknown = auth.new_token()
    for _ in range(2):
        assert (await refusal(board, unknown)).details() == "unknown token"
    assert counts() == {**before, "miss": before["miss"] + 3, "hit": before["hit"] + 1}


async def test_a_cached_token_revoked_is_refused_once_the_notice_arrives(event_log, board):
    name = unique("rita")
    await register(event_log, name)
    token = await token_for(event_log, name)
    await caller(board, token)
    hits = lookups("hit")
    await caller(board, token)
    assert lookups("hit") == hits + 1  # cached
    refused_before = refused_count("revoked")
    await revoke(event_log, token)
    await eventually(lambda: refusal(board, token), "the revoked token refused")
    error = await refusal(board, token)
    assert error.details().startswith("token revoked at 20")
    assert refused_count("revoked") >= refused_before + 2


async def test_an_owners_role_change_reaches_its_agents_cached_sign_in(event_log, board):
    owner = unique("otto")
    await register(event_log, owner, role=MEMBER)
    await register(event_log, f"{owner}/bot", kind=AGENT, owner=owner, role=0)
    agent_token, owner_token = await token_for(event_log, f"{owner}/bot"), await token_for(event_log, owner)
    hits = lookups("hit")
    for token in (agent_token, owner_token, agent_token, owner_token):
        assert (await caller(board, token)).endswith("|member")
    assert lookups("hit") == hits + 2  # both cached

    await event_log.pool.execute("UPDATE principals SET role = $2 WHERE name = $1", owner, MAINTAINER)

    async def both_maintainers():
        return [await caller(board, token) for token in (agent_token, owner_token)] == [
            f"{owner}/bot|{owner}|maintainer",
            f"{owner}|{owner}|maintainer",
        ]

    await eventually(both_maintainers, "the owner's promotion reaching the agent's and the owner's sign-ins")
    await event_log.pool.execute("UPDATE principals SET role = $2 WHERE name = $1", owner, MEMBER)

    async def agent_is_member():
        return (await caller(board, agent_token)).endswith("|member")

    await eventually(agent_is_member, "the owner's demotion reaching the agent")


async def test_an_expired_token_is_refused_while_cached(event_log, board):
    name = unique("eve")
    await register(event_log, name)
    token = await token_for(event_log, name, ttl=timedelta(seconds=2))
    expires_at = await event_log.pool.fetchval(
        "SELECT expires_at FROM api_tokens WHERE token_hash = $1", auth.hash_token(token)
    )
    await caller(board, token)
    await caller(board, token)
    before, refused_before = counts(), refused_count("expired")
    await asyncio.sleep(max(0.0, (expires_at - datetime.now(UTC)).total_seconds()) + 0.05)
    error = await refusal(board, token)
    assert error.details() == f"token expired at {expires_at.isoformat(timespec='seconds')}"
    assert refused_count("expired") == refused_before + 1
    assert counts() == {**before, "hit": before["hit"] + 1}  # refused from the cache, on the clock alone


async def test_an_expiry_moved_into_the_past_is_honored_through_its_notice(event_log, board):
    name = unique("max")
    await register(event_log, name)
    token = await token_for(event_log, name)  # no expiry: only the notice can make the cached sign-in refuse
    await caller(board, token)
    await caller(board, token)
    await event_log.pool.execute(
        "UPDATE api_tokens SET expires_at = now() - interval '1 minute' WHERE token_hash = $1", auth.hash_token(token)
    )
    await eventually(lambda: refusal(board, token), "the expiry moved into the past honored")
    assert (await refusal(board, token)).details().startswith("token expired at 20")


async def test_calls_bypass_the_cache_while_the_listener_is_lost_and_stay_right(event_log, database_url, board):
    pool = event_log.pool
    name = unique("lola")
    await register(event_log, name)
    kept, revoked_meanwhile = await token_for(event_log, name), await token_for(event_log, name)
    for token in (kept, revoked_meanwhile, kept, revoked_meanwhile):
        await caller(board, token)
    database_name = database_url.rsplit("/", 1)[1]
    admin = await asyncpg.connect(ADMIN_URL)
    with capture_logs() as logs:
        # Refuse new connections to this database, so that the listener stays lost until allowed again (the pool
        # keeps the connections it has).
        await admin.execute(f'ALTER DATABASE "{database_name}" ALLOW_CONNECTIONS false')
        try:
            (listener,) = await listener_backends(pool)
            assert await pool.fetchval("SELECT pg_terminate_backend($1)", listener)
            await eventually(lambda: listeners_connected() == 0, "the listener noticing its connection gone")

            before = counts()
            assert await caller(board, kept) == f"{name}|{name}|member"
            await revoke(event_log, revoked_meanwhile)
            assert (await refusal(board, revoked_meanwhile)).details().startswith("token revoked at")
            assert counts() == {**before, "bypass": before["bypass"] + 2}
        finally:
            await admin.execute(f'ALTER DATABASE "{database_name}" ALLOW_CONNECTIONS true')
            await admin.close()
        await eventually(lambda: listeners_connected() == 1, "the listener back", timeout_s=15)
    events = [line["event"] for line in logs if line.get("component") == "auth"]
    assert "auth listener disconnected" in events and events[-1] == "auth listener connected", events
    assert (await listener_backends(pool)) != [listener]

    before = counts()
    await caller(board, kept)
    await caller(board, kept)
    assert (await refusal(board, revoked_meanwhile)).details().startswith("token revoked at")
    assert counts() == {**before, "miss": before["miss"] + 2, "hit": before["hit"] + 1}  # the cache started empty


async def test_the_listener_starts_and_stops_with_the_server_and_leaks_nothing(event_log, server):
    pool = event_log.pool
    (module_listener,) = await listener_backends(pool)
    tasks_before = listener_tasks()
    started = await start_server("test-auth-cache-2", add_all, port=0, pool=pool)
    try:
        await eventually(lambda: listeners_connected() == 2, "the second server's listener connected")
        assert len(listener_tasks()) == len(tasks_before) + 1
        assert len(await listener_backends(pool)) == 2
        with pytest.raises(OSError, match="in use"):  # a server that cannot bind starts no listener
            await start_server("test-auth-cache-3", add_all, port=started.port, pool=pool)
        assert len(listener_tasks()) == len(tasks_before) + 1
    finally:
        await started.stop(0)
    assert listener_tasks() == tasks_before and listeners_connected() == 1

    async def only_the_module_listener_left():
        return await listener_backends(pool) == [module_listener]

    await eventually(only_the_module_listener_left, "the stopped server's listener connection closed")


# --- the notices themselves, in a database of their own (a table is truncated) ---


async def test_the_triggers_announce_updates_deletes_and_truncates_but_not_inserts():
    async with throwaway_database("authnotice") as url:
        event_log = await EventLog.connect(url, migrate=True)
        listening = await asyncpg.connect(url)
        notices: asyncio.Queue[str] = asyncio.Queue()
        await listening.add_listener(token_cache.AUTH_CHANGED_CHANNEL, lambda *args: notices.put_nowait(args[-1]))
        interceptor = auth.AuthInterceptor(event_log.pool)
        try:
            service = "system:sched-1"
            await register(event_log, service, kind=SERVICE, role=MEMBER)
            await register(event_log, "ana")
            token, service_token = await token_for(event_log, "ana"), await token_for(event_log, service)

            await revoke(event_log, token)
            await event_log.pool.execute("UPDATE principals SET role = $2 WHERE name = $1", service, MAINTAINER)
            await event_log.pool.execute("DELETE FROM api_tokens WHERE token_hash = $1", auth.hash_token(token))
            received = [await asyncio.wait_for(notices.get(), NOTICE_WAIT_S) for _ in range(3)]
            assert received == [
                f"token:{auth.hash_token(token)}",
                f"principal:{service}",
                f"token:{auth.hash_token(token)}",
            ]
            assert notices.empty()  # the registrations and token issues before them announced nothing

            # A service identity's name holds ':' and its role change still reaches its cached sign-in; a truncated
            # table ('all') empties the cache.
            interceptor.start()
            await eventually(lambda: interceptor.listener.connected, "the interceptor's listener connected")
            assert (await interceptor.authenticate(service_token)).role == MAINTAINER
            await event_log.pool.execute("UPDATE principals SET role = $2 WHERE name = $1", service, MEMBER)

            async def demoted():
                return (await interceptor.authenticate(service_token)).role == MEMBER

            await eventually(demoted, "the service identity's demotion reaching its cached sign-in")
            await event_log.pool.execute("TRUNCATE api_tokens")
            assert [await asyncio.wait_for(notices.get(), NOTICE_WAIT_S) for _ in range(2)] == [
                f"principal:{service}",
                "all",
            ]

            async def unknown():
                try:
                    await interceptor.authenticate(service_token)
                except AuthError as err:
                    return err.reason == "unknown"
                return False

            await eventually(unknown, "the truncated token refused")
        finally:
            await interceptor.stop()
            await listening.close()
            await event_log.close()
