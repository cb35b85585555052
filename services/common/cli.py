"""Operator subcommands of ``kb``: ``kb admin …`` (PostgreSQL directly, on the host) and ``kb status``.

``kb admin`` talks to the database at KB_DATABASE_URL, not to a service: it is how an operator (and ``make up``)
creates the first maintainer and its token before anyone can sign in. The one exception is ``kb admin disqualify``,
a maintainer's own act in person: it signs in to the board service with the stored token like ``kb board``, since
host access gives no role (contracts/access.py). Heavy imports stay inside the handlers.
"""

import asyncio
import json
import os
import sys

ROLE_CHOICES = ("maintainer", "member", "signed-in")


def register(subparsers) -> None:
    admin = subparsers.add_parser("admin", help="operator commands on the host: migrations, users, tokens")
    admin_commands = admin.add_subparsers(dest="admin_command", metavar="COMMAND", required=True)

    migrate = admin_commands.add_parser("migrate", help="apply the database migrations not yet applied")
    migrate.set_defaults(handler=run_migrate)

    user = admin_commands.add_parser("user", help="people, their agents and service identities")
    user_commands = user.add_subparsers(dest="user_command", metavar="COMMAND", required=True)
    add = user_commands.add_parser("add", help="register a person, an agent (--agent-of) or a service (--service)")
    add.add_argument("name", help="a person's name, or OWNER/AGENT for an agent")
    add.add_argument("--role", choices=ROLE_CHOICES, help="for people and services; an agent takes its owner's")
    kind = add.add_mutually_exclusive_group()
    kind.add_argument("--agent-of", metavar="OWNER", help="register an agent acting for OWNER")
    kind.add_argument("--service", action="store_true", help="register a service identity (e.g. the scheduler)")
    add.add_argument("--exist-ok", action="store_true", help="succeed when it already exists as asked (for make up)")
    add.set_defaults(handler=run_user_add)
    listing = user_commands.add_parser("list", help="every principal with its kind, owner and effective role")
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    listing.set_defaults(handler=run_user_list)

    token = admin_commands.add_parser("token", help="API tokens (stored hashed; shown once when issued)")
    token_commands = token.add_subparsers(dest="token_command", metavar="COMMAND", required=True)
    issue = token_commands.add_parser("issue", help="issue a token for NAME and print it (once)")
    issue.add_argument("name")
    issue.add_argument("--ttl-days", type=float, metavar="N", help="expire after N days (default: never)")
    issue.set_defaults(handler=run_token_issue)
    tokens = token_commands.add_parser("list", help="NAME's tokens by hash, with their state (live/expired/revoked)")
    tokens.add_argument("name")
    tokens.add_argument("--json", action="store_true", help="machine-readable output")
    tokens.set_defaults(handler=run_token_list)
    revoke = token_commands.add_parser("revoke", help="revoke a token (the token itself or its sha256 hex)")
    revoke.add_argument("token")
    revoke.set_defaults(handler=run_token_revoke)

    disqualify = admin_commands.add_parser(
        "disqualify",
        help="a maintainer in person: take a verified check off the ranking, with the reason (kept beside as evidence)",
    )
    disqualify.add_argument("check_id", metavar="CHECK_ID")
    disqualify.add_argument("--reason", required=True, help="what was found (reinstating: why it stands)")
    disqualify.add_argument("--reinstate", action="store_true", help="undo an earlier disqualification")
    disqualify.add_argument("--json", action="store_true", help="machine-readable output")
    disqualify.set_defaults(handler=run_disqualify)

    status = subparsers.add_parser("status", help="health and /metrics of the four services")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.add_argument("--timeout", type=float, default=2.0, metavar="S", help="per probe (default 2 s)")
    status.set_defaults(handler=run_status)


def fail(message: str, code: int = 1) -> int:
    print(f"kb: {message}", file=sys.stderr)
    return code


def run_admin(coroutine_function, args) -> int:
    """Run an admin coroutine against KB_DATABASE_URL; a refused request or an unreachable database is one line."""
    import asyncpg

    from services.common.auth import AuthError
    from services.common.config import Settings
    from services.common.logs import configure_logging

    configure_logging("kb")  # JSON on stderr: stdout carries only the command's answer (e.g. a token)
    url = Settings.from_env().database_url
    try:
        return asyncio.run(coroutine_function(url, args)) or 0
    except (ValueError, AuthError) as err:
        return fail(str(err))
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as err:
        return fail(f"database {url}: {err}")


def run_migrate(args) -> int:
    async def migrate(url, _args):
        import asyncpg

        from services.common.migrate import apply_migrations

        conn = await asyncpg.connect(url)
        try:
            applied = await apply_migrations(conn)
        finally:
            await conn.close()
        print(f"applied migrations {', '.join(f'{n:04d}' for n in applied)}" if applied else "migrations up to date")

    return run_admin(migrate, args)


def run_user_add(args) -> int:
    from contracts import access
    from services.common import auth

    if args.agent_of:
        kind, owner, role = auth.AGENT, args.agent_of, 0
        if args.role:
            return fail(f"an agent takes its owner's role: drop --role {args.role}", 2)
        if "/" not in args.name:
            args.name = f"{args.agent_of}/{args.name}"
    else:
        if not args.role:
            return fail("--role is needed for a person or a service (maintainer, member or signed-in)", 2)
        kind, owner, role = (auth.SERVICE if args.service else auth.PERSON), "", auth.role_from_name(args.role)

    async def add(url, args):
        from services.common.eventlog import EventLog

        log = await EventLog.connect(url, migrate=True)
        try:
            async with log.pool.acquire() as conn:
                try:
                    principal = await auth.register_principal(
                        conn, args.name, kind, owner, role, log=log, actor=operator_name()
                    )
                except auth.PrincipalExists:
                    if not args.exist_ok:
                        raise
                    principal = await auth.get_principal(conn, args.name)
                    if not access.registered_as(principal, kind, owner or args.name, role):
                        return fail(f"{args.name} already exists as {principal.describe()}, not as asked")
                    print(f"{principal.describe()} already registered")
                    return 0
        finally:
            await log.close()
        print(f"registered {auth.KIND_NAMES[principal.kind]} {principal.describe()}")
        return 0

    return run_admin(add, args)


def run_user_list(args) -> int:
    async def listing(url, args):
        import asyncpg

        from services.common.auth import KIND_NAMES, ROLE_NAMES

        conn = await asyncpg.connect(url)
        try:
            rows = await conn.fetch(
                "SELECT p.name, p.kind, p.owner, o.role, p.created_at,"
                " (SELECT count(*) FROM api_tokens t WHERE t.principal = p.name AND t.revoked_at IS NULL"
                "  AND (t.expires_at IS NULL OR t.expires_at > now())) AS live_tokens"
                " FROM principals p JOIN principals o ON o.name = p.owner ORDER BY p.name"
            )
        finally:
            await conn.close()
        users = [
            {
                "name": row["name"],
                "kind": KIND_NAMES[row["kind"]],
                "owner": row["owner"],
                "role": ROLE_NAMES[row["role"]],
                "live_tokens": row["live_tokens"],
                "created_at": row["created_at"].isoformat(timespec="seconds"),
            }
            for row in rows
        ]
        if args.json:
            print(json.dumps(users, indent=2))
        else:
            print_table(users, ("name", "kind", "owner", "role", "live_tokens", "created_at"))

    return run_admin(listing, args)


def run_token_issue(args) -> int:
    from datetime import timedelta

    ttl = timedelta(days=args.ttl_days) if args.ttl_days is not None else None

    async def issue(url, args):
        import asyncpg

        from services.common.auth import issue_token

        conn = await asyncpg.connect(url)
        try:
            token = await issue_token(conn, args.name, ttl=ttl)
        finally:
            await conn.close()
        lifetime = f"expires in {args.ttl_days:g} days" if ttl else "does not expire"
        print(f"token for {args.name} ({lifetime}); shown once, only its hash is stored:", file=sys.stderr)
        print(token)

    return run_admin(issue, args)


def run_token_list(args) -> int:
    async def listing(url, args):
        import asyncpg

        from services.common.auth import get_principal, list_tokens

        conn = await asyncpg.connect(url)
        try:
            if await get_principal(conn, args.name) is None:
                raise ValueError(f"no principal named {args.name!r}")
            tokens = await list_tokens(conn, args.name)
        finally:
            await conn.close()

        def when(moment):
            return moment.isoformat(timespec="seconds") if moment else ""

        rows = [
            {
                "token_hash": token.token_hash,
                "state": token.state,
                "created_at": when(token.created_at),
                "expires_at": when(token.expires_at),
                "revoked_at": when(token.revoked_at),
            }
            for token in tokens
        ]
        if args.json:
            print(json.dumps(rows, indent=2))
        else:
            print_table(rows, ("token_hash", "state", "created_at", "expires_at", "revoked_at"))

    return run_admin(listing, args)


def run_token_revoke(args) -> int:
    async def revoke(url, args):
        import asyncpg

        from services.common.auth import revoke_token

        conn = await asyncpg.connect(url)
        try:
            await revoke_token(conn, args.token)
        finally:
            await conn.close()
        print("token revoked")

    return run_admin(revoke, args)


def operator_name() -> str:
    from contracts import names

    return names.operator(os.environ.get("SUDO_USER") or os.environ.get("USER") or "root")


def probe(service: str, timeout: float) -> dict:
    """gRPC health (the whole server, service "") and whether /metrics answers with kb_ metrics."""
    import urllib.request

    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from services.common.config import METRICS_PORTS, Settings

    address = Settings.from_env().grpc_address(service)
    host = address.rsplit(":", 1)[0]
    metrics_address = os.environ.get(f"KB_{service.upper()}_METRICS_ADDR", f"{host}:{METRICS_PORTS[service]}")
    result = {"service": service, "address": address, "health": "", "metrics_address": metrics_address, "metrics": ""}
    with grpc.insecure_channel(address) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=timeout)
            result["health"] = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
        except grpc.RpcError as err:
            result["health"] = f"unreachable ({err.code().name})"
    try:
        with urllib.request.urlopen(f"http://{metrics_address}/metrics", timeout=timeout) as response:
            body = response.read().decode(errors="replace")
        result["metrics"] = "ok" if "# TYPE kb_" in body else "answers, but no kb_ metrics"
    except OSError as err:
        result["metrics"] = f"unreachable ({getattr(err, 'reason', err)})"
    result["ok"] = result["health"] == "SERVING" and result["metrics"] == "ok"
    return result


def run_disqualify(args) -> int:
    import grpc
    from kernelboard.v1 import board_pb2, board_pb2_grpc

    from services.cli import client

    request = board_pb2.DisqualifyCheckRequest(check_id=args.check_id, reason=args.reason, reinstate=args.reinstate)
    try:
        stub = board_pb2_grpc.BoardStub(client.channel("board"))
        reply = stub.DisqualifyCheck(request, metadata=client.metadata())
    except client.NotSignedIn as err:
        return fail(str(err))
    except grpc.RpcError as err:
        return fail(f"{err.code().name}: {err.details()}")
    done = "reinstated" if args.reinstate else "disqualified"
    data = {"check_id": args.check_id, done: True, "version": reply.version, "global_position": reply.global_position}
    if args.json:
        print(json.dumps(data, sort_keys=True))
    else:
        print(f"check {args.check_id} {done} on board {reply.version} (log position {reply.global_position})")
    return 0


def run_status(args) -> int:
    from concurrent.futures import ThreadPoolExecutor

    from services.common.config import GRPC_PORTS

    with ThreadPoolExecutor(max_workers=len(GRPC_PORTS)) as pool:
        results = list(pool.map(lambda service: probe(service, args.timeout), GRPC_PORTS))
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print_table(results, ("service", "address", "health", "metrics_address", "metrics"))
    return 0 if all(result["ok"] for result in results) else 1


def print_table(rows: list[dict], columns: tuple[str, ...]) -> None:
    widths = {column: max([len(column), *(len(str(row[column])) for row in rows)]) for column in columns}
    print("  ".join(column.upper().ljust(widths[column]) for column in columns).rstrip())
    for row in rows:
        print("  ".join(str(row[column]).ljust(widths[column]) for column in columns).rstrip())
