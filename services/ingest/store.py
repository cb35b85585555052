"""The ingest tables in Postgres (migrations/0100_ingest.sql): ref values (the truth the git refs follow), routes,
pull requests and reviews. Each write takes the caller's connection so that it commits with the events."""

from dataclasses import dataclass
from datetime import datetime

import asyncpg


class RefMoved(Exception):
    """The ref is no longer at the value the push was checked against (a concurrent push won)."""

    def __init__(self, ref: str, expected: str, actual: str):
        super().__init__(
            f"{ref} moved to {actual[:12] or 'nothing'} while this push was checked against "
            f"{expected[:12] or 'nothing'}: non-fast-forward now; fetch and push again"
        )


@dataclass(frozen=True)
class RouteRow:
    route: str
    owner: str
    started_by: str
    base_sha: str
    started_at: datetime


@dataclass(frozen=True)
class ReviewRow:
    verdict: int
    body: str
    reviewer: str


@dataclass(frozen=True)
class PullRow:
    number: int
    route: str
    head_sha: str
    base_ref: str
    title: str
    author: str
    state: str
    merge_sha: str
    merged_by: str
    reviews: tuple[ReviewRow, ...] = ()


async def ref_values(conn) -> dict[str, str]:
    return {row["ref"]: row["sha"] for row in await conn.fetch("SELECT ref, sha FROM ingest_refs")}


async def ref_values_of(conn, refs: list[str]) -> dict[str, str]:
    rows = await conn.fetch("SELECT ref, sha FROM ingest_refs WHERE ref = ANY($1::text[])", refs)
    return {row["ref"]: row["sha"] for row in rows}


async def ref_value(conn, ref: str) -> str:
    return await conn.fetchval("SELECT sha FROM ingest_refs WHERE ref = $1", ref) or ""


async def set_ref_aside(conn, ref: str, sha: str, reason: str) -> bool:
    """Move a ref's row to ingest_refs_set_aside (if it still holds ``sha``); False when it had moved meanwhile."""
    async with conn.transaction():
        row = await conn.fetchrow("DELETE FROM ingest_refs WHERE ref = $1 AND sha = $2 RETURNING *", ref, sha)
        if row is None:
            return False
        await conn.execute(
            "INSERT INTO ingest_refs_set_aside (ref, sha, updated_by, updated_at, reason) VALUES ($1, $2, $3, $4, $5)",
            ref,
            sha,
            row["updated_by"],
            row["updated_at"],
            reason,
        )
    return True


async def set_route_aside(conn, route: str, reason: str) -> bool:
    """Move a route's row to ingest_routes_set_aside; False when pull requests refer to it (it stays) or it is gone."""
    async with conn.transaction():
        if await conn.fetchval("SELECT 1 FROM ingest_pulls WHERE route = $1 LIMIT 1", route):
            return False
        row = await conn.fetchrow("DELETE FROM ingest_routes WHERE route = $1 RETURNING *", route)
        if row is None:
            return False
        await conn.execute(
            "INSERT INTO ingest_routes_set_aside (route, owner, started_by, base_sha, started_at, reason)"
            " VALUES ($1, $2, $3, $4, $5, $6)",
            route,
            row["owner"],
            row["started_by"],
            row["base_sha"],
            row["started_at"],
            reason,
        )
    return True


async def records_set_aside(conn) -> int:
    """Ref and route rows set aside, all time."""
    return await conn.fetchval(
        "SELECT (SELECT count(*) FROM ingest_refs_set_aside) + (SELECT count(*) FROM ingest_routes_set_aside)"
    )


async def move_ref(conn: asyncpg.Connection, ref: str, old: str, new: str, actor: str) -> None:
    """Compare-and-swap: the ref goes from ``old`` ("" = absent) to ``new`` or RefMoved. Concurrent movers of one ref
    serialise on its row lock; the loser re-reads the winner's value and fails here."""
    if old:
        done = await conn.fetchval(
            "UPDATE ingest_refs SET sha = $3, updated_by = $4, updated_at = now() WHERE ref = $1 AND sha = $2"
            " RETURNING ref",
            ref,
            old,
            new,
            actor,
        )
    else:
        done = await conn.fetchval(
            "INSERT INTO ingest_refs (ref, sha, updated_by) VALUES ($1, $2, $3) ON CONFLICT (ref) DO NOTHING"
            " RETURNING ref",
            ref,
            new,
            actor,
        )
    if done is None:
        raise RefMoved(ref, old, await ref_value(conn, ref))


def _route(row) -> RouteRow | None:
    return RouteRow(**dict(row)) if row else None


async def get_route(conn, route: str) -> RouteRow | None:
    return _route(await conn.fetchrow("SELECT * FROM ingest_routes WHERE route = $1", route))


async def list_routes(conn) -> list[RouteRow]:
    return [_route(row) for row in await conn.fetch("SELECT * FROM ingest_routes ORDER BY started_at, route")]


async def insert_route(conn, route: str, owner: str, started_by: str, base_sha: str) -> RouteRow | None:
    """The new route, or None when the name is taken."""
    return _route(
        await conn.fetchrow(
            "INSERT INTO ingest_routes (route, owner, started_by, base_sha) VALUES ($1, $2, $3, $4)"
            " ON CONFLICT (route) DO NOTHING RETURNING *",
            route,
            owner,
            started_by,
            base_sha,
        )
    )


async def insert_pull(conn, route: str, head_sha: str, base_ref: str, title: str, author: str) -> int:
    return await conn.fetchval(
        "INSERT INTO ingest_pulls (route, head_sha, base_ref, title, author) VALUES ($1, $2, $3, $4, $5)"
        " RETURNING number",
        route,
        head_sha,
        base_ref,
        title,
        author,
    )


async def get_pull(conn, number: int, *, for_update: bool = False) -> PullRow | None:
    row = await conn.fetchrow(
        "SELECT * FROM ingest_pulls WHERE number = $1" + (" FOR UPDATE" if for_update else ""), number
    )
    if row is None:
        return None
    reviews = await conn.fetch(
        "SELECT verdict, body, reviewer FROM ingest_reviews WHERE number = $1 ORDER BY id", number
    )
    return _pull(row, tuple(ReviewRow(**dict(r)) for r in reviews))


def _pull(row, reviews=()) -> PullRow:
    fields = {k: row[k] for k in ("number", "route", "head_sha", "base_ref", "title", "author", "state")}
    return PullRow(**fields, merge_sha=row["merge_sha"] or "", merged_by=row["merged_by"] or "", reviews=reviews)


async def list_pulls(conn, route: str = "", state: str = "") -> list[PullRow]:
    rows = await conn.fetch(
        "SELECT * FROM ingest_pulls WHERE ($1 = '' OR route = $1) AND ($2 = '' OR state = $2) ORDER BY number",
        route,
        state,
    )
    return [_pull(row) for row in rows]


async def insert_review(conn, number: int, verdict: int, body: str, reviewer: str) -> None:
    await conn.execute(
        "INSERT INTO ingest_reviews (number, verdict, body, reviewer) VALUES ($1, $2, $3, $4)",
        number,
        verdict,
        body,
        reviewer,
    )


async def mark_merged(conn, number: int, merge_sha: str, merged_by: str) -> None:
    await conn.execute(
        "UPDATE ingest_pulls SET state = 'merged', merge_sha = $2, merged_by = $3 WHERE number = $1",
        number,
        merge_sha,
        merged_by,
    )
