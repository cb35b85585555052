"""Who is calling: principals (people, their agents, service identities), API tokens and roles.

Tokens are ``kb_`` + 43 url-safe characters (256 random bits) and are stored as their sha256. A fast unsalted hash
is the right tool for secrets of that entropy: guessing one is 2^256 work whatever the hash costs, and no dictionary
or precomputed table applies, which is what salts and slow hashes defend passwords against. It also lets a token be
found by its hash in one index lookup.

Roles are ordered: signed-in < member < maintainer. An agent acts for its owner: its effective role is its owner's,
so a change to the owner's role reaches the owner's agents at once.

A server's AuthInterceptor signs a call in from a cache of successful sign-ins (principal and expiry, by token hash)
rather than a PostgreSQL lookup per call. The expiry is checked against the clock on every call, cached or not. The
cache follows the database through LISTEN kb_auth_changed on a connection of its own: triggers (migration 0011)
announce every update or delete of a token or a principal, and the notice drops the token's entry, or the entries of
the principal and of its agents. Entries are only trusted while that connection listens: until it is connected, and
from the moment it is lost until it listens again, every call is looked up in PostgreSQL as if there were no cache,
and the cache starts empty on each (re)connection, since notices may have been missed meanwhile. A revocation or a
role change therefore takes effect on the next call once its notice arrives (milliseconds), as it did with a lookup
per call. Refusals are never cached.
"""

import contextlib
import contextvars
import hashlib
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import grpc
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection
from kernelboard.v1 import events_pb2

from contracts import access, names
from contracts.access import KIND_NAMES, ROLE_NAMES, Actor
from contracts.refusals import Refusal
from services.common import metrics
from services.common.eventlog import NewEvent
from services.common.handlers import HandlerWrappers
from services.common.logs import bind_ids, get_logger
from services.common.token_cache import DEFAULT_TOKEN_CACHE_SIZE, AuthChangeListener, TokenCache, drop_in_this_process

TOKEN_PREFIX = names.TOKEN_PREFIX

PERSON, AGENT, SERVICE = (
    events_pb2.PRINCIPAL_KIND_PERSON,
    events_pb2.PRINCIPAL_KIND_AGENT,
    events_pb2.PRINCIPAL_KIND_SERVICE,
)
SIGNED_IN, MEMBER, MAINTAINER = events_pb2.ROLE_SIGNED_IN, events_pb2.ROLE_MEMBER, events_pb2.ROLE_MAINTAINER

# A rise in "unknown" is a client misconfigured or guessing; in "expired", tokens due for renewal.
AUTH_REFUSED = metrics.counter("kb_auth_refused_total", "Calls refused UNAUTHENTICATED, by reason.", ("reason",))
# bypass: the change listener is down, so the cache is not trusted and every call costs a PostgreSQL lookup.
TOKEN_CACHE_LOOKUPS = metrics.counter(
    "kb_auth_token_cache_lookups_total",
    "Bearer tokens looked up by the auth interceptor: hit (cache), miss (PostgreSQL, then cached if signed in), "
    "bypass (PostgreSQL: the auth change listener is down).",
    ("result",),
)
# Resolved once: a child's labels() lookup takes a lock, and these are counted on every signed-in call.
_CACHE_HIT, _CACHE_MISS, _CACHE_BYPASS = (TOKEN_CACHE_LOOKUPS.labels(result) for result in ("hit", "miss", "bypass"))


log = get_logger(component="auth")

DEFAULT_OPEN_METHODS = frozenset(
    {
        f"/{health_pb2.DESCRIPTOR.services_by_name['Health'].full_name}/Check",
        f"/{health_pb2.DESCRIPTOR.services_by_name['Health'].full_name}/Watch",
        f"/{reflection.SERVICE_NAME}/ServerReflectionInfo",
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    }
)


class AuthError(Refusal):
    """Why a caller could not be signed in (UNAUTHENTICATED); ``reason`` is one word for metrics: missing,
    malformed, unknown, expired or revoked."""

    def __init__(self, message: str, reason: str):
        super().__init__("UNAUTHENTICATED", reason, message)


class PrincipalExists(ValueError):
    pass


def role_from_name(name: str) -> int:
    for role, role_name in ROLE_NAMES.items():
        if role_name == name:
            return role
    raise ValueError(f"unknown role {name!r}: one of {', '.join(ROLE_NAMES.values())}")


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def check_principal(name: str, kind: int, owner: str, role: int) -> tuple[str, int | None]:
    """The owner and stored role for a new principal, or ValueError naming what is wrong."""
    if kind == AGENT:
        if not names.AGENT.matches(name):
            raise ValueError(f"agent name {name!r} must be <owner>/<agent>, each letters, digits, . _ - (max 64)")
        if owner != names.agent_owner(name):
            raise ValueError(f"agent {name!r} must be named after its owner: {owner}/<agent>")
        if access.has_role_of_its_own(role):
            raise ValueError(f"agent {name!r} takes its owner's role; give no role of its own")
        return owner, None
    if kind not in (PERSON, SERVICE):
        raise ValueError(f"unknown principal kind {kind}")
    if not names.PERSON.matches(name) and not (kind == SERVICE and names.SERVICE.matches(name)):
        raise ValueError(f"name {name!r} must be letters, digits, . _ - (max 64), starting with a letter or digit")
    if owner not in ("", name):
        raise ValueError(f"only agents have an owner; {name!r} is a {KIND_NAMES[kind]}")
    if not access.is_role(role):
        raise ValueError(f"{name!r} needs a role: {', '.join(ROLE_NAMES.values())}")
    return name, role


async def register_principal(conn, name: str, kind: int, owner: str, role: int, *, log, actor: str) -> Actor:
    """Insert the principal and append PrincipalRegistered to ``principal:<name>`` in one transaction."""
    owner, stored_role = check_principal(name, kind, owner, role)
    async with conn.transaction():
        if kind == AGENT:
            row = await conn.fetchrow("SELECT kind, role FROM principals WHERE name = $1 FOR SHARE", owner)
            if row is None:
                raise ValueError(f"agent {name!r}: owner {owner!r} is not registered")
            if row["kind"] != PERSON:
                raise ValueError(f"agent {name!r}: owner {owner!r} is a {KIND_NAMES[row['kind']]}, not a person")
            role = row["role"]
        inserted = await conn.fetchval(
            "INSERT INTO principals (name, kind, owner, role) VALUES ($1, $2, $3, $4)"
            " ON CONFLICT (name) DO NOTHING RETURNING name",
            name,
            kind,
            owner,
            stored_role,
        )
        if inserted is None:
            raise PrincipalExists(f"principal {name!r} already exists")
        registered = events_pb2.PrincipalRegistered(name=name, kind=kind, owner=owner, role=role)
        await log.append(names.principal_stream(name), 0, [NewEvent(payload=registered, actor=actor)], conn=conn)
    return Actor(name, kind, owner, role)


async def get_principal(conn, name: str) -> Actor | None:
    row = await conn.fetchrow(
        "SELECT p.name, p.kind, p.owner, o.role FROM principals p JOIN principals o ON o.name = p.owner"
        " WHERE p.name = $1",
        name,
    )
    return Actor(row["name"], row["kind"], row["owner"], row["role"]) if row else None


async def issue_token(conn, principal_name: str, *, ttl: timedelta | None = None) -> str:
    """A new token for the principal, returned in plain this once; only its hash is stored."""
    token = new_token()
    expires_at = datetime.now(UTC) + ttl if ttl is not None else None
    if ttl is not None and ttl <= timedelta(0):
        raise ValueError(f"token lifetime must be positive, got {ttl}")
    inserted = await conn.fetchval(
        "INSERT INTO api_tokens (token_hash, principal, expires_at)"
        " SELECT $1, name, $3 FROM principals WHERE name = $2 RETURNING principal",
        hash_token(token),
        principal_name,
        expires_at,
    )
    if inserted is None:
        raise ValueError(f"no principal named {principal_name!r}")
    return token


async def revoke_token(conn, token_or_hash: str) -> None:
    """Revoke by the plain token or its sha256 hex; revoking twice keeps the first revocation time."""
    token_hash = token_or_hash if names.TOKEN_HASH.matches(token_or_hash) else hash_token(token_or_hash)
    found = await conn.fetchval(
        "UPDATE api_tokens SET revoked_at = coalesce(revoked_at, now()) WHERE token_hash = $1 RETURNING principal",
        token_hash,
    )
    if found is None:
        raise AuthError("unknown token: nothing revoked", "unknown")
    drop_in_this_process(token_hashes=(token_hash,))


@dataclass(frozen=True)
class TokenInfo:
    token_hash: str  # not a secret: it cannot sign in, and it is what `kb admin token revoke` takes
    principal: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None

    @property
    def state(self) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= datetime.now(UTC):
            return "expired"
        return "live"


async def list_tokens(conn, principal_name: str) -> list[TokenInfo]:
    """The principal's tokens, newest first, so an operator can revoke one whose plain text is lost."""
    rows = await conn.fetch(
        "SELECT token_hash, principal, created_at, expires_at, revoked_at FROM api_tokens WHERE principal = $1"
        " ORDER BY created_at DESC",
        principal_name,
    )
    return [TokenInfo(**row) for row in rows]


@dataclass(frozen=True)
class SignIn:
    """A token's successful sign-in, as the token cache keeps it."""

    principal: Actor
    expires_at: datetime | None

    def check_not_expired(self) -> None:
        """AuthError once the expiry has passed: checked on every call, a cached sign-in included."""
        if self.expires_at is not None and self.expires_at <= datetime.now(UTC):
            raise AuthError(f"token expired at {self.expires_at.isoformat(timespec='seconds')}", "expired")


def well_formed_token_hash(token: str) -> str:
    """The hash of a token of the right shape, or AuthError (malformed) before any lookup."""
    if not names.TOKEN.matches(token):
        raise AuthError("malformed token: expected kb_ followed by 43 characters", "malformed")
    return hash_token(token)


async def look_up_sign_in(pool, token_hash: str) -> SignIn:
    """The sign-in of a token by its hash, read from PostgreSQL, or AuthError (unknown, revoked, expired)."""
    row = await pool.fetchrow(
        "SELECT t.expires_at, t.revoked_at, p.name, p.kind, p.owner, o.role"
        " FROM api_tokens t JOIN principals p ON p.name = t.principal JOIN principals o ON o.name = p.owner"
        " WHERE t.token_hash = $1",
        token_hash,
    )
    if row is None:
        raise AuthError("unknown token", "unknown")
    if row["revoked_at"] is not None:
        raise AuthError(f"token revoked at {row['revoked_at'].isoformat(timespec='seconds')}", "revoked")
    sign_in = SignIn(Actor(row["name"], row["kind"], row["owner"], row["role"]), row["expires_at"])
    sign_in.check_not_expired()
    return sign_in


async def authenticate(pool, token: str) -> Actor:
    """The principal a token signs in, or AuthError saying why not (malformed, unknown, expired, revoked); always
    read from PostgreSQL (the interceptor's calls go through its token cache)."""
    return (await look_up_sign_in(pool, well_formed_token_hash(token))).principal


def bearer_token(metadata: Iterable[tuple[str, str | bytes]] | None) -> str:
    """The token of an ``authorization: Bearer <token>`` header, or AuthError (missing or malformed header)."""
    values = [value for key, value in metadata or () if key == "authorization"]
    if not values:
        raise AuthError(
            "missing authorization metadata: send 'authorization: Bearer <token>' (see `kb login`)", "missing"
        )
    value = values[0].decode() if isinstance(values[0], bytes) else values[0]
    scheme, _, token = value.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthError("malformed authorization metadata: expected 'Bearer <token>'", "malformed")
    return token.strip()


_principal: contextvars.ContextVar[Actor] = contextvars.ContextVar("kb_principal")


def current_principal() -> Actor:
    """The caller of the RPC being handled (set by AuthInterceptor in the handler's task)."""
    try:
        return _principal.get()
    except LookupError:
        raise RuntimeError("no signed-in principal here: outside an RPC, or in a method open to all") from None


@contextlib.contextmanager
def acting_as(principal: Actor):
    """Make ``principal`` the current one for the block (the interceptor's use; also background work on a
    caller's behalf)."""
    token = _principal.set(principal)
    try:
        yield principal
    finally:
        with contextlib.suppress(ValueError):  # exited from another context: an abandoned stream's generator
            _principal.reset(token)


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Signs in every call outside ``open_methods`` from its bearer token; UNAUTHENTICATED says why it could not.

    The lookup and the contextvar both happen inside the handler's own task (the method's handler wrapped once, by
    HandlerWrappers), so ``current_principal()`` holds in the handler however grpc.aio schedules interceptors.
    Sign-ins come from the token cache while its listener is connected (``start``/``stop``: start_server runs them
    with the server), else from PostgreSQL (see the module doc).
    """

    def __init__(
        self, pool, open_methods: Iterable[str] = DEFAULT_OPEN_METHODS, *, cache_size: int = DEFAULT_TOKEN_CACHE_SIZE
    ):
        self._pool = pool
        self._open_methods = frozenset(open_methods)
        self.token_cache = TokenCache(cache_size)
        self.listener = AuthChangeListener(pool, self.token_cache)
        self._wrappers = HandlerWrappers(lambda _full_method: self._signed_in)

    def start(self) -> None:
        self.listener.start()

    async def stop(self) -> None:
        await self.listener.stop()

    async def authenticate(self, token: str) -> Actor:
        """``authenticate(pool, token)`` through the token cache while it is trusted."""
        token_hash = well_formed_token_hash(token)
        cache = self.token_cache
        if not cache.trusted:
            _CACHE_BYPASS.inc()
            return (await look_up_sign_in(self._pool, token_hash)).principal
        cached = cache.get(token_hash)
        if cached is not None:
            _CACHE_HIT.inc()
            cached.check_not_expired()
            return cached.principal
        _CACHE_MISS.inc()
        generation = cache.generation
        sign_in = await look_up_sign_in(self._pool, token_hash)
        cache.put(token_hash, sign_in, generation)
        return sign_in.principal

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None or handler_call_details.method in self._open_methods:
            return handler
        return self._wrappers.wrap(handler_call_details.method, handler)

    @contextlib.asynccontextmanager
    async def _signed_in(self, context):
        try:
            principal = await self.authenticate(bearer_token(context.invocation_metadata()))
        except AuthError as err:
            AUTH_REFUSED.labels(err.reason).inc()
            raise  # a Refusal: the server's interceptor turns it into its status, as for every other one
        # Bound for the rest of the call's own task (grpc.aio runs each call in one), not just this block, so
        # the access log line written after the handler names the caller too.
        bind_ids(principal=principal.name)
        with acting_as(principal):
            yield


async def change_role(conn, name: str, role: int, from_role: int) -> bool:
    """Move a person's stored role from ``from_role`` to ``role`` (a join accepted, a member leaving). The update is
    announced on kb_auth_changed (migration 0011), so every service's token cache drops the sign-ins of the person and
    of their agents, and the next call sees the new role. False, and nothing changed, when the stored role was not
    ``from_role``."""
    changed = await conn.fetchval(
        "UPDATE principals SET role = $2 WHERE name = $1 AND kind = $3 AND role = $4 RETURNING name",
        name,
        role,
        PERSON,
        from_role,
    )
    if changed is not None:
        drop_in_this_process(principals=(name,))
    return changed is not None


@dataclass(frozen=True)
class RoleSync:
    promoted: tuple[str, ...]  # now maintainers
    demoted: tuple[str, ...]  # maintainers no longer listed: now members
    unknown: tuple[str, ...]  # listed, but not registered (yet)


async def set_maintainers(conn, names: Iterable[str]) -> RoleSync:
    """Bring stored roles in step with scienceslack.json's ``maintainers``: the persons listed become maintainers,
    maintainers no longer listed become members. Agents follow their owners without a change here."""
    names = sorted(set(names))
    async with conn.transaction():
        promoted = await conn.fetch(
            "UPDATE principals SET role = $2 WHERE kind = $3 AND name = ANY($1::text[]) AND role <> $2 RETURNING name",
            names,
            MAINTAINER,
            PERSON,
        )
        demoted = await conn.fetch(
            "UPDATE principals SET role = $2 WHERE kind = $3 AND role = $4 AND NOT name = ANY($1::text[])"
            " RETURNING name",
            names,
            MEMBER,
            PERSON,
            MAINTAINER,
        )
        known = await conn.fetch(
            "SELECT name FROM principals WHERE kind = $2 AND name = ANY($1::text[])", names, PERSON
        )
    known_names = {row["name"] for row in known}
    drop_in_this_process(principals=[row["name"] for row in (*promoted, *demoted)])
    return RoleSync(
        promoted=tuple(sorted(row["name"] for row in promoted)),
        demoted=tuple(sorted(row["name"] for row in demoted)),
        unknown=tuple(name for name in names if name not in known_names),
    )
