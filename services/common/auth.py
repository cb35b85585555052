"""Who is calling: principals (people, their agents, service identities), API tokens and roles.

Tokens are ``kb_`` + 43 url-safe characters (256 random bits) and are stored as their sha256. A fast unsalted hash
is the right tool for secrets of that entropy: guessing one is 2^256 work whatever the hash costs, and no dictionary
or precomputed table applies, which is what salts and slow hashes defend passwords against. It also lets a token be
found by its hash in one index lookup.

Roles are ordered: signed-in < member < maintainer. An agent acts for its owner: its effective role is its owner's,
read at every sign-in, so a change to the owner's role reaches the owner's agents at once.
"""

import contextlib
import contextvars
import hashlib
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import grpc
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection
from kernelboard.v1 import events_pb2

from services.common import metrics
from services.common.eventlog import NewEvent
from services.common.grpcserver import wrap_handler
from services.common.logs import bind_ids

TOKEN_PREFIX = "kb_"
_TOKEN_RE = re.compile(r"^kb_[A-Za-z0-9_-]{43}$")
_HASH_RE = re.compile(r"^[0-9a-f]{64}$")
_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
_PERSON_RE = re.compile(rf"^{_NAME}$")
_SERVICE_RE = re.compile(rf"^system:{_NAME}$")  # service identities, e.g. system:scheduler
_AGENT_RE = re.compile(rf"^({_NAME})/{_NAME}$")

PERSON, AGENT, SERVICE = (
    events_pb2.PRINCIPAL_KIND_PERSON,
    events_pb2.PRINCIPAL_KIND_AGENT,
    events_pb2.PRINCIPAL_KIND_SERVICE,
)
SIGNED_IN, MEMBER, MAINTAINER = events_pb2.ROLE_SIGNED_IN, events_pb2.ROLE_MEMBER, events_pb2.ROLE_MAINTAINER
ROLE_NAMES = {SIGNED_IN: "signed-in", MEMBER: "member", MAINTAINER: "maintainer"}
KIND_NAMES = {PERSON: "person", AGENT: "agent", SERVICE: "service"}

# A rise in "unknown" is a client misconfigured or guessing; in "expired", tokens due for renewal.
AUTH_REFUSED = metrics.counter("kb_auth_refused_total", "Calls refused UNAUTHENTICATED, by reason.", ("reason",))

DEFAULT_OPEN_METHODS = frozenset(
    {
        f"/{health_pb2.DESCRIPTOR.services_by_name['Health'].full_name}/Check",
        f"/{health_pb2.DESCRIPTOR.services_by_name['Health'].full_name}/Watch",
        f"/{reflection.SERVICE_NAME}/ServerReflectionInfo",
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    }
)


class AuthError(Exception):
    """Why a caller could not be signed in; ``reason`` is one word for metrics: missing, malformed, unknown,
    expired or revoked."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason


class PrincipalExists(ValueError):
    pass


@dataclass(frozen=True)
class Principal:
    name: str
    kind: int  # events_pb2.PrincipalKind
    owner: str  # an agent's owner is the person it acts for; anyone else owns themselves
    role: int  # events_pb2.Role; an agent's is its owner's

    @property
    def role_name(self) -> str:
        return ROLE_NAMES.get(self.role, "no role")

    def describe(self) -> str:
        """``alice/bot (agent of alice, member)`` or ``alice (member)``, for messages."""
        if self.kind == AGENT:
            return f"{self.name} (agent of {self.owner}, {self.role_name})"
        return f"{self.name} ({self.role_name})"


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
        match = _AGENT_RE.match(name)
        if not match:
            raise ValueError(f"agent name {name!r} must be <owner>/<agent>, each letters, digits, . _ - (max 64)")
        if owner != match.group(1):
            raise ValueError(f"agent {name!r} must be named after its owner: {owner}/<agent>")
        if role not in (events_pb2.ROLE_UNSPECIFIED, None):
            raise ValueError(f"agent {name!r} takes its owner's role; give no role of its own")
        return owner, None
    if kind not in (PERSON, SERVICE):
        raise ValueError(f"unknown principal kind {kind}")
    if not _PERSON_RE.match(name) and not (kind == SERVICE and _SERVICE_RE.match(name)):
        raise ValueError(f"name {name!r} must be letters, digits, . _ - (max 64), starting with a letter or digit")
    if owner not in ("", name):
        raise ValueError(f"only agents have an owner; {name!r} is a {KIND_NAMES[kind]}")
    if role not in ROLE_NAMES:
        raise ValueError(f"{name!r} needs a role: {', '.join(ROLE_NAMES.values())}")
    return name, role


async def register_principal(conn, name: str, kind: int, owner: str, role: int, *, log, actor: str) -> Principal:
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
        await log.append(f"principal:{name}", 0, [NewEvent(payload=registered, actor=actor)], conn=conn)
    return Principal(name=name, kind=kind, owner=owner, role=role)


async def get_principal(conn, name: str) -> Principal | None:
    row = await conn.fetchrow(
        "SELECT p.name, p.kind, p.owner, o.role FROM principals p JOIN principals o ON o.name = p.owner"
        " WHERE p.name = $1",
        name,
    )
    return Principal(row["name"], row["kind"], row["owner"], row["role"]) if row else None


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
    token_hash = token_or_hash if _HASH_RE.match(token_or_hash) else hash_token(token_or_hash)
    found = await conn.fetchval(
        "UPDATE api_tokens SET revoked_at = coalesce(revoked_at, now()) WHERE token_hash = $1 RETURNING principal",
        token_hash,
    )
    if found is None:
        raise AuthError("unknown token: nothing revoked", "unknown")


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


async def authenticate(pool, token: str) -> Principal:
    """The principal a token signs in, or AuthError saying why not (malformed, unknown, expired, revoked)."""
    if not _TOKEN_RE.match(token):
        raise AuthError("malformed token: expected kb_ followed by 43 characters", "malformed")
    row = await pool.fetchrow(
        "SELECT t.expires_at, t.revoked_at, p.name, p.kind, p.owner, o.role"
        " FROM api_tokens t JOIN principals p ON p.name = t.principal JOIN principals o ON o.name = p.owner"
        " WHERE t.token_hash = $1",
        hash_token(token),
    )
    if row is None:
        raise AuthError("unknown token", "unknown")
    if row["revoked_at"] is not None:
        raise AuthError(f"token revoked at {row['revoked_at'].isoformat(timespec='seconds')}", "revoked")
    if row["expires_at"] is not None and row["expires_at"] <= datetime.now(UTC):
        raise AuthError(f"token expired at {row['expires_at'].isoformat(timespec='seconds')}", "expired")
    return Principal(row["name"], row["kind"], row["owner"], row["role"])


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


_principal: contextvars.ContextVar[Principal] = contextvars.ContextVar("kb_principal")


def current_principal() -> Principal:
    """The caller of the RPC being handled (set by AuthInterceptor in the handler's task)."""
    try:
        return _principal.get()
    except LookupError:
        raise RuntimeError("no signed-in principal here: outside an RPC, or in a method open to all") from None


@contextlib.contextmanager
def acting_as(principal: Principal):
    """Make ``principal`` the current one for the block (the interceptor's use; also background work on a
    caller's behalf)."""
    token = _principal.set(principal)
    try:
        yield principal
    finally:
        with contextlib.suppress(ValueError):  # exited from another context: an abandoned stream's generator
            _principal.reset(token)


async def require_role(context: grpc.aio.ServicerContext, role: int, action: str) -> Principal:
    """Abort PERMISSION_DENIED ("maintainer role needed to <action>; alice (member) is not") unless allowed."""
    principal = current_principal()
    if principal.role < role:
        await context.abort(
            grpc.StatusCode.PERMISSION_DENIED,
            f"{ROLE_NAMES[role]} role needed to {action}; {principal.describe()} is not",
        )
    return principal


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Signs in every call outside ``open_methods`` from its bearer token; UNAUTHENTICATED says why it could not.

    The lookup and the contextvar both happen inside the handler's own task (through wrap_handler), so
    ``current_principal()`` holds in the handler however grpc.aio schedules interceptors.
    """

    def __init__(self, pool, open_methods: Iterable[str] = DEFAULT_OPEN_METHODS):
        self._pool = pool
        self._open_methods = frozenset(open_methods)

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None or handler_call_details.method in self._open_methods:
            return handler
        metadata = handler_call_details.invocation_metadata

        @contextlib.asynccontextmanager
        async def signed_in(context):
            try:
                principal = await authenticate(self._pool, bearer_token(metadata))
            except AuthError as err:
                AUTH_REFUSED.labels(err.reason).inc()
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, str(err))
            # Bound for the rest of the call's own task (grpc.aio runs each call in one), not just this block, so
            # the access log line written after the handler names the caller too.
            bind_ids(principal=principal.name)
            with acting_as(principal):
                yield

        return wrap_handler(handler, signed_in)


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
    return RoleSync(
        promoted=tuple(sorted(row["name"] for row in promoted)),
        demoted=tuple(sorted(row["name"] for row in demoted)),
        unknown=tuple(name for name in names if name not in known_names),
    )
