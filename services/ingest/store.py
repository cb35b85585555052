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
    reviewed_at: datetime


@dataclass(frozen=True)
class PullRow:
    """A pull request as every reply shows it: always with its reviews (a row without them would say "no reviews")."""

    number: int
    route: str
    head_sha: str
    base_ref: str
    title: str
    body: str
    author: str
    author_owner: str
    state: str
    merge_sha: str
    merged_by: str
    opened_at: datetime
    reviews: tuple[ReviewRow, ...]


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


async def insert_pull(
    conn, route: str, head_sha: str, base_ref: str, title: str, body: str, author: str, author_owner: str
) -> int:
    return await conn.fetchval(
        "INSERT INTO ingest_pulls (route, head_sha, base_ref, title, body, author, author_owner)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING number",
        route,
        head_sha,
        base_ref,
        title,
        body,
        author,
        author_owner,
    )


async def get_pull(conn, number: int, *, for_update: bool = False) -> PullRow | None:
    row = await conn.fetchrow(
        "SELECT * FROM ingest_pulls WHERE number = $1" + (" FOR UPDATE" if for_update else ""), number
    )
    return (await _with_reviews(conn, [row]))[0] if row else None


async def list_pulls(conn, route: str = "", state: str = "") -> list[PullRow]:
    rows = await conn.fetch(
        "SELECT * FROM ingest_pulls WHERE ($1 = '' OR route = $1) AND ($2 = '' OR state = $2) ORDER BY number",
        route,
        state,
    )
    return await _with_reviews(conn, rows)


async def _with_reviews(conn, rows) -> list[PullRow]:
    """The pull requests of ``rows``, each with its reviews oldest first: the one way a PullRow is made."""
    reviews: dict[int, list[ReviewRow]] = {row["number"]: [] for row in rows}
    for review in await conn.fetch(
        "SELECT number, verdict, body, reviewer, reviewed_at FROM ingest_reviews WHERE number = ANY($1::bigint[])"
        " ORDER BY id",
        list(reviews),
    ):
        reviews[review["number"]].append(
            ReviewRow(review["verdict"], review["body"], review["reviewer"], review["reviewed_at"])
        )
    fields = ("number", "route", "head_sha", "base_ref", "title", "body", "author", "author_owner", "state")
    return [
        PullRow(
            **{k: row[k] for k in fields},
            merge_sha=row["merge_sha"] or "",
            merged_by=row["merged_by"] or "",
            opened_at=row["opened_at"],
            reviews=tuple(reviews[row["number"]]),
        )
        for row in rows
    ]


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


# --- issues, comments, join requests (migrations/0110_issues_and_join.sql) -----------------------------------------


@dataclass(frozen=True)
class IssueRow:
    number: int
    title: str
    body: str
    author: str
    author_owner: str
    state: str
    closed_by: str
    opened_at: datetime
    comments: int = 0


@dataclass(frozen=True)
class CommentRow:
    id: int
    issue_number: int
    pull_number: int
    body: str
    author: str
    created_at: datetime


@dataclass(frozen=True)
class JoinRow:
    id: int
    name: str
    note: str
    state: str
    decided_by: str
    decision_note: str
    requested_at: datetime


_ISSUE_COLUMNS = (
    "i.number, i.title, i.body, i.author, i.author_owner, i.state, coalesce(i.closed_by, '') AS closed_by, i.opened_at,"
    " (SELECT count(*) FROM ingest_comments c WHERE c.issue_number = i.number) AS comments"
)


async def insert_issue(conn, title: str, body: str, author: str, author_owner: str) -> int:
    return await conn.fetchval(
        "INSERT INTO ingest_issues (title, body, author, author_owner) VALUES ($1, $2, $3, $4) RETURNING number",
        title,
        body,
        author,
        author_owner,
    )


async def get_issue(conn, number: int, *, for_update: bool = False) -> IssueRow | None:
    if for_update:
        await conn.execute("SELECT 1 FROM ingest_issues WHERE number = $1 FOR UPDATE", number)
    row = await conn.fetchrow(f"SELECT {_ISSUE_COLUMNS} FROM ingest_issues i WHERE i.number = $1", number)
    return IssueRow(**dict(row)) if row else None


async def list_issues(conn, state: str, after: int, limit: int) -> list[IssueRow]:
    rows = await conn.fetch(
        f"SELECT {_ISSUE_COLUMNS} FROM ingest_issues i WHERE ($1 = '' OR i.state = $1) AND i.number > $2"
        " ORDER BY i.number LIMIT $3",
        state,
        after,
        limit,
    )
    return [IssueRow(**dict(row)) for row in rows]


async def set_issue_state(conn, number: int, state: str, by: str) -> None:
    await conn.execute(
        "UPDATE ingest_issues SET state = $2, closed_by = CASE WHEN $2 = 'closed' THEN $3 END WHERE number = $1",
        number,
        state,
        by,
    )


def _comment(row) -> CommentRow:
    return CommentRow(
        row["id"], row["issue_number"] or 0, row["pull_number"] or 0, row["body"], row["author"], row["created_at"]
    )


async def insert_comment(conn, issue_number: int, pull_number: int, body: str, author: str) -> CommentRow:
    return _comment(
        await conn.fetchrow(
            "INSERT INTO ingest_comments (issue_number, pull_number, body, author) VALUES ($1, $2, $3, $4) RETURNING *",
            issue_number or None,
            pull_number or None,
            body,
            author,
        )
    )


async def list_comments(conn, issue_number: int, pull_number: int, after: int, limit: int) -> list[CommentRow]:
    column = "issue_number" if issue_number else "pull_number"
    rows = await conn.fetch(
        f"SELECT * FROM ingest_comments WHERE {column} = $1 AND id > $2 ORDER BY id LIMIT $3",
        issue_number or pull_number,
        after,
        limit,
    )
    return [_comment(row) for row in rows]


_JOIN_COLUMNS = "id, name, note, state, coalesce(decided_by, '') AS decided_by, decision_note, requested_at"


async def insert_join_request(conn, name: str, note: str) -> JoinRow | None:
    """The new pending request, or None when the person has one pending already."""
    row = await conn.fetchrow(
        "INSERT INTO ingest_join_requests (name, note) VALUES ($1, $2)"
        f" ON CONFLICT (name) WHERE state = 'pending' DO NOTHING RETURNING {_JOIN_COLUMNS}",
        name,
        note,
    )
    return JoinRow(**dict(row)) if row else None


async def pending_join_request(conn, name: str, *, for_update: bool = False) -> JoinRow | None:
    row = await conn.fetchrow(
        f"SELECT {_JOIN_COLUMNS} FROM ingest_join_requests WHERE name = $1 AND state = 'pending'"
        + (" FOR UPDATE" if for_update else ""),
        name,
    )
    return JoinRow(**dict(row)) if row else None


async def decide_join_request(conn, request_id: int, state: str, by: str, note: str) -> JoinRow:
    row = await conn.fetchrow(
        "UPDATE ingest_join_requests SET state = $2, decided_by = $3, decision_note = $4, decided_at = now()"
        f" WHERE id = $1 RETURNING {_JOIN_COLUMNS}",
        request_id,
        state,
        by,
        note,
    )
    return JoinRow(**dict(row))


async def list_join_requests(conn, state: str, after: int, limit: int) -> list[JoinRow]:
    rows = await conn.fetch(
        f"SELECT {_JOIN_COLUMNS} FROM ingest_join_requests WHERE ($1 = '' OR state = $1) AND id > $2"
        " ORDER BY id LIMIT $3",
        state,
        after,
        limit,
    )
    return [JoinRow(**dict(row)) for row in rows]
