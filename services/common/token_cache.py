"""The auth interceptor's cache of successful sign-ins (services/common/auth.py) and what keeps it right: a listener
on PostgreSQL's kb_auth_changed notices (triggers of migration 0011) that drops a changed token's entry, or a changed
principal's and its agents', and trusts the cache only while it listens; and the drop of this process's own changes
at once, before their notice comes back."""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections import OrderedDict
from collections.abc import Iterable
from typing import TYPE_CHECKING

import asyncpg

from services.common import metrics
from services.common.logs import get_logger

if TYPE_CHECKING:
    from services.common.auth import SignIn

log = get_logger(component="auth")

AUTH_LISTENER_CONNECTED = metrics.gauge(
    "kb_auth_listener_connected",
    "Auth change listeners connected (a server runs one: 1 while its token cache is trusted, 0 while it is not).",
)
# Announced by the triggers of migration 0011: 'token:<hash>', 'principal:<name>' or 'all'.
AUTH_CHANGED_CHANNEL = "kb_auth_changed"
DEFAULT_TOKEN_CACHE_SIZE = 10_000  # a few MB at most; beyond it the least recently used sign-in is dropped
# How the listener's connection shows in pg_stat_activity.
LISTENER_APPLICATION_NAME = "kb-auth-listener"


# Every token cache of this process: a change made here drops its entries at once, so that the caller's next call to
# this server sees it even before the change's notice has come back through the listener (other servers' caches learn
# it from the notice, milliseconds later). See drop_in_this_process.
_CACHES_IN_THIS_PROCESS: weakref.WeakSet[TokenCache] = weakref.WeakSet()


def drop_in_this_process(*, principals: Iterable[str] = (), token_hashes: Iterable[str] = ()) -> None:
    """Called by auth's changes of a token or a principal right after their UPDATE, inside the caller's transaction:
    a lookup already under way is refused by the cache's generation, and one that starts before the commit is dropped
    again by the notice that the commit sends."""
    principals, token_hashes = tuple(principals), tuple(token_hashes)
    for cache in list(_CACHES_IN_THIS_PROCESS):
        for name in principals:
            cache.drop_principal(name)
        for token_hash in token_hashes:
            cache.drop_token(token_hash)


class TokenCache:
    """Successful sign-ins by token hash; beyond ``max_size`` the least recently used is dropped.

    ``trusted`` is set while the change listener listens (the listener sets and clears it). ``generation`` moves
    on every drop, clear and change of trust: a lookup that started under an older generation may have read a row
    that a notice has since made stale, so ``put`` refuses its result.
    """

    def __init__(self, max_size: int = DEFAULT_TOKEN_CACHE_SIZE):
        if max_size < 1:
            raise ValueError(f"token cache size must be at least 1, got {max_size}")
        self.max_size = max_size
        self.trusted = False
        self.generation = 0
        self._sign_ins: OrderedDict[str, SignIn] = OrderedDict()
        # Token hashes under the names a notice may carry: the principal's own and its owner's (an agent's role).
        self._hashes_by_name: dict[str, set[str]] = {}
        _CACHES_IN_THIS_PROCESS.add(self)

    def __len__(self) -> int:
        return len(self._sign_ins)

    def get(self, token_hash: str) -> SignIn | None:
        sign_in = self._sign_ins.get(token_hash)
        if sign_in is not None:
            self._sign_ins.move_to_end(token_hash)
        return sign_in

    def put(self, token_hash: str, sign_in: SignIn, generation: int) -> bool:
        """Keep a sign-in looked up under ``generation``; False (not kept) when untrusted or stale since."""
        if not self.trusted or generation != self.generation:
            return False
        self._discard(token_hash)
        self._sign_ins[token_hash] = sign_in
        for name in {sign_in.principal.name, sign_in.principal.owner}:
            self._hashes_by_name.setdefault(name, set()).add(token_hash)
        while len(self._sign_ins) > self.max_size:
            self._discard(next(iter(self._sign_ins)))
        return True

    def drop_token(self, token_hash: str) -> None:
        self.generation += 1
        self._discard(token_hash)

    def drop_principal(self, name: str) -> None:
        """Drop the sign-ins of ``name`` and of its agents, whose role is its."""
        self.generation += 1
        for token_hash in list(self._hashes_by_name.get(name, ())):
            self._discard(token_hash)

    def clear(self) -> None:
        self.generation += 1
        self._sign_ins.clear()
        self._hashes_by_name.clear()

    def set_trusted(self, trusted: bool) -> None:
        """Start empty either way: notices may have been missed while untrusted."""
        self.clear()
        self.trusted = trusted

    def _discard(self, token_hash: str) -> None:
        sign_in = self._sign_ins.pop(token_hash, None)
        if sign_in is None:
            return
        for name in {sign_in.principal.name, sign_in.principal.owner}:
            hashes = self._hashes_by_name[name]
            hashes.discard(token_hash)
            if not hashes:
                del self._hashes_by_name[name]


# What losing the listener's connection looks like: logged as a warning and retried; anything else with its trace.
_CONNECTION_ERRORS = (
    OSError,  # refused, unreachable, timed out (TimeoutError)
    asyncpg.PostgresError,  # e.g. terminated by an administrator, the database shutting down or not accepting
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
)


class AuthChangeListener:
    """Keeps a TokenCache in step with the kb_auth_changed notices, and trusts it only while it listens.

    The connection is its own, made with the pool's settings but outside it: held for as long as the server runs, a
    pooled one would take one of the calls' connections for good (the verifier's pool has 4). It reconnects with
    backoff (``retry_delay_s`` doubling up to ``max_retry_delay_s``). A connection closed by the server is noticed at
    once (asyncpg's termination callback); one that died silently (a network cut: no notice, no close) by a ping every
    ``ping_interval_s``, within twice that.
    """

    def __init__(
        self,
        pool,
        cache: TokenCache,
        *,
        retry_delay_s: float = 0.1,
        max_retry_delay_s: float = 10.0,
        ping_interval_s: float = 5.0,
    ):
        self._pool = pool
        self.cache = cache
        self.retry_delay_s = retry_delay_s
        self.max_retry_delay_s = max_retry_delay_s
        self.ping_interval_s = ping_interval_s
        self._task: asyncio.Task | None = None

    @property
    def connected(self) -> bool:
        return self.cache.trusted

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="kb-auth-listener")

    async def stop(self) -> None:
        """Cancel the listener and close its connection; the cache is untrusted (and empty) afterwards."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            log.info("auth listener stopped")

    async def _run(self) -> None:
        delay = self.retry_delay_s
        while True:
            try:
                conn = await _connect_like(self._pool)
            except _CONNECTION_ERRORS as err:
                log.warning("auth listener cannot connect", error=repr(err), retry_in_s=delay)
            else:
                try:
                    await self._listen(conn)
                except _CONNECTION_ERRORS as err:
                    log.warning("auth listener disconnected", error=repr(err))
                except Exception:
                    log.exception("auth listener failed")
                finally:
                    listened = self._untrust()
                    await _close(conn)
                if listened:
                    delay = self.retry_delay_s  # a working connection lost: retry at once, backing off from there
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.max_retry_delay_s)

    async def _listen(self, conn: asyncpg.Connection) -> None:
        """Trust the cache from the moment LISTEN holds until the connection fails (raises)."""
        closed = asyncio.Event()
        conn.add_termination_listener(lambda _conn: closed.set())
        await conn.add_listener(AUTH_CHANGED_CHANNEL, self._on_notice)
        self.cache.set_trusted(True)
        AUTH_LISTENER_CONNECTED.inc()
        log.info("auth listener connected", backend_pid=conn.get_server_pid())
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(closed.wait(), self.ping_interval_s)
            if closed.is_set():
                raise ConnectionError("connection closed")
            await conn.execute("SELECT 1", timeout=self.ping_interval_s)

    def _untrust(self) -> bool:
        """Back to a lookup per call; True when the cache had been trusted."""
        if not self.cache.trusted:
            return False
        self.cache.set_trusted(False)
        AUTH_LISTENER_CONNECTED.dec()
        return True

    def _on_notice(self, _conn, _pid, _channel, payload: str) -> None:
        kind, _, key = payload.partition(":")  # a principal's name may hold ':' too (system:scheduler)
        if kind == "token":
            self.cache.drop_token(key)
        elif kind == "principal":
            self.cache.drop_principal(key)
        else:  # 'all' (a table truncated); a payload this version does not know is taken the same way
            self.cache.clear()


async def _connect_like(pool) -> asyncpg.Connection:
    """A connection with the pool's settings (DSN, credentials, connect timeout), outside the pool. asyncpg keeps
    them in Pool._connect_args and _connect_kwargs and has no getter for them (only set_connect_args)."""
    kwargs = dict(pool._connect_kwargs)
    kwargs["server_settings"] = {**(kwargs.get("server_settings") or {}), "application_name": LISTENER_APPLICATION_NAME}
    return await asyncpg.connect(*pool._connect_args, **kwargs)


async def _close(conn: asyncpg.Connection) -> None:
    try:
        with contextlib.suppress(Exception):  # a broken connection fails its goodbye
            await conn.close(timeout=2)
    finally:
        if not conn.is_closed():  # the goodbye failed or stop() cut it short: drop the socket
            conn.terminate()
