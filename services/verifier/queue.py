"""The durable work queue of checks, on PostgreSQL (the schema: migrations/0300_verifier.sql).

Workers claim with SELECT ... FOR UPDATE SKIP LOCKED and hold a lease they renew while the check runs; a worker that
dies stops renewing and its check goes back to whoever claims next. A check is completed once: its CheckCompleted
append (expected_version 1 on `check:<id>`, where CheckRequested is version 1) and its row's final state commit in
one transaction, and a second completion finds the row final and is refused.
"""

from dataclasses import dataclass
from datetime import datetime

import asyncpg
from kernelboard.v1 import events_pb2

from contracts import names
from contracts.metrics import VERIFIER_VERSION
from contracts.rules import parse
from services.common.eventlog import ConcurrencyConflict, DuplicateEvent, EventLog, NewEvent, decode_row
from services.verifier import domain
from services.verifier.domain import ApprovedRules, CheckItem, Verdict

NOTIFY_CHANNEL = "kb_verifier_checks"  # payload: the check id whose row changed
ACTOR = "system:verifier"
OPEN_STATES = ("queued", "running")

ITEM_COLUMNS = (
    "check_id, dedupe_key, check_name, ref, sha, route, kind, job_id, rules_commit, benchmark_version, script,"
    " metrics_file, time_limit_s, trigger_event_id, owner, partition, gres, supersede"
)
_ROW_COLUMNS = (
    f"{ITEM_COLUMNS}, state, attempts, claimed_by, lease_expires_at, enqueued_at, started_at, finished_at,"
    " completed_position, slurm_job_id, runner_node"
)


@dataclass(frozen=True)
class Claim:
    item: CheckItem
    attempts: int  # runs started, this one included


@dataclass(frozen=True)
class CheckRow:
    item: CheckItem
    state: str
    attempts: int
    claimed_by: str | None
    enqueued_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    result: events_pb2.CheckCompleted | None
    slurm_job_id: str = ""  # on the runners: the running attempt's Slurm job
    runner_node: str = ""  # ... and the node it runs on, once Slurm started it


def item_of(row) -> CheckItem:
    return CheckItem(
        check_id=str(row["check_id"]),
        dedupe_key=row["dedupe_key"],
        check_name=row["check_name"],
        ref=row["ref"],
        sha=row["sha"],
        route=row["route"],
        kind=row["kind"],
        job_id=row["job_id"],
        rules_commit=row["rules_commit"],
        benchmark_version=row["benchmark_version"],
        script=row["script"],
        metrics_file=row["metrics_file"],
        time_limit_s=row["time_limit_s"],
        trigger_event_id=str(row["trigger_event_id"]),
        owner=row["owner"],
        partition=row["partition"],
        gres=row["gres"],
        supersede=row["supersede"],
    )


class CheckQueue:
    def __init__(self, log: EventLog, *, lease_s: float = 60.0, runners: bool = False):
        """runners: checks that name a partition go to the Slurm dispatcher (dispatch.py); the verifier's own
        workers claim only the others. False: the workers run every check on this host, partition or not."""
        self.log = log
        self.pool = log.pool
        self.lease_s = lease_s
        self.runners = runners

    # --- the rules (written by the intake consumer, in its transaction) ---

    async def save_rules(
        self, conn: asyncpg.Connection, rules_commit: str, benchmark_version: int, rules_json: str, position: int
    ) -> None:
        await conn.execute(
            "INSERT INTO verifier_rules (rules_commit, benchmark_version, rules_json, position) VALUES ($1, $2, $3, $4)"
            " ON CONFLICT (singleton) DO UPDATE SET rules_commit = $1, benchmark_version = $2, rules_json = $3,"
            " position = $4, updated_at = now() WHERE verifier_rules.position < $4",
            rules_commit,
            benchmark_version,
            rules_json,
            position,
        )

    async def current_rules(self, conn: asyncpg.Connection | None = None) -> ApprovedRules | None:
        row = await (conn or self.pool).fetchrow("SELECT rules_commit, rules_json FROM verifier_rules")
        if row is None:
            return None
        return ApprovedRules(row["rules_commit"], parse(row["rules_json"]))

    # --- intake ---

    async def enqueue(self, conn: asyncpg.Connection, items: list[CheckItem], actor: str = ACTOR) -> list[CheckItem]:
        """Queues the items not queued before and appends their CheckRequested, in the caller's transaction.

        Returns the items queued now; an item whose key is already queued (a redelivered commit) is skipped.
        """
        queued = []
        for item in items:
            inserted = await conn.fetchval(
                f"INSERT INTO verifier_checks ({ITEM_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10,"
                " $11, $12, $13, $14, $15, $16, $17, $18) ON CONFLICT DO NOTHING RETURNING check_id",
                item.check_id,
                item.dedupe_key,
                item.check_name,
                item.ref,
                item.sha,
                item.route,
                item.kind,
                item.job_id,
                item.rules_commit,
                item.benchmark_version,
                item.script,
                item.metrics_file,
                item.time_limit_s,
                item.trigger_event_id,
                item.owner,
                item.partition,
                item.gres,
                item.supersede,
            )
            if inserted is not None:
                queued.append(item)
        for item in queued:
            requested = NewEvent(
                domain.requested_event(item), actor=actor, event_id=domain.requested_event_id(item.check_id)
            )
            await self.log.append(names.check_stream(item.check_id), 0, [requested], conn=conn)
            await conn.execute("SELECT pg_notify($1, $2)", NOTIFY_CHANNEL, item.check_id)
        return queued

    # --- workers ---

    async def claim(self, worker: str) -> Claim | None:
        """The oldest queued check, or a running one whose lease expired; None when there is none."""
        async with self.pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                f"""UPDATE verifier_checks SET state = 'running', claimed_by = $1, attempts = attempts + 1,
                        lease_expires_at = now() + make_interval(secs => $2), heartbeat_at = now(),
                        started_at = coalesce(started_at, now())
                    WHERE check_id = (
                        SELECT check_id FROM verifier_checks
                        WHERE (state = 'queued' OR (state = 'running' AND lease_expires_at < now()))
                            AND (NOT $3 OR partition = '')
                        ORDER BY enqueued_at, check_id
                        FOR UPDATE SKIP LOCKED LIMIT 1)
                    RETURNING {ITEM_COLUMNS}, attempts""",
                worker,
                self.lease_s,
                self.runners,
            )
            if row is None:
                return None
            await conn.execute("SELECT pg_notify($1, $2)", NOTIFY_CHANNEL, str(row["check_id"]))
        return Claim(item_of(row), row["attempts"])

    async def heartbeat(self, check_id: str, worker: str) -> bool:
        """Renews the lease; False when the check is no longer this worker's (completed, or claimed by another
        after the lease ran out): the worker should stop running it."""
        renewed = await self.pool.fetchval(
            "UPDATE verifier_checks SET lease_expires_at = now() + make_interval(secs => $3), heartbeat_at = now()"
            " WHERE check_id = $1 AND claimed_by = $2 AND state = 'running' RETURNING true",
            check_id,
            worker,
            self.lease_s,
        )
        return bool(renewed)

    async def release(self, check_id: str, worker: str) -> None:
        """Gives a claimed check back untouched (a worker shutting down), so another takes it at once."""
        async with self.pool.acquire() as conn, conn.transaction():
            released = await conn.fetchval(
                "UPDATE verifier_checks SET state = 'queued', claimed_by = NULL, lease_expires_at = NULL,"
                " attempts = greatest(attempts - 1, 0) WHERE check_id = $1 AND claimed_by = $2 AND state = 'running'"
                " RETURNING true",
                check_id,
                worker,
            )
            if released:
                await conn.execute("SELECT pg_notify($1, $2)", NOTIFY_CHANNEL, check_id)

    async def complete(self, check_id: str, verdict: Verdict) -> events_pb2.Event | None:
        """Appends the CheckCompleted and marks the check final, in one transaction; None when the check was
        completed already (by this worker or another), in which case nothing is written."""
        try:
            async with self.pool.acquire() as conn, conn.transaction():
                return await self.complete_in(conn, check_id, verdict)
        except (ConcurrencyConflict, DuplicateEvent):
            return None

    async def complete_in(self, conn: asyncpg.Connection, check_id: str, verdict: Verdict) -> events_pb2.Event | None:
        """complete() in the caller's transaction (the intake's, superseding older checks)."""
        completed = NewEvent(
            verdict.completed,
            actor=ACTOR,
            event_id=domain.completed_event_id(check_id),
            verifier_version=VERIFIER_VERSION,
        )
        state = "passed" if verdict.completed.passed else "failed"
        current = await conn.fetchval("SELECT state FROM verifier_checks WHERE check_id = $1 FOR UPDATE", check_id)
        if current is None:
            raise KeyError(f"no check {check_id} in the queue")
        if current not in OPEN_STATES:
            return None
        [event] = await self.log.append(names.check_stream(check_id), 1, [completed], conn=conn)
        await conn.execute(
            "UPDATE verifier_checks SET state = $2, claimed_by = NULL, lease_expires_at = NULL,"
            " finished_at = now(), completed_position = $3 WHERE check_id = $1",
            check_id,
            state,
            event.global_position,
        )
        await conn.execute("SELECT pg_notify($1, $2)", NOTIFY_CHANNEL, check_id)
        return event

    async def depth(self) -> int:
        """Checks waiting for a worker: queued, or running under a lease that ran out."""
        return await self.pool.fetchval(
            "SELECT count(*) FROM verifier_checks"
            " WHERE (state = 'queued' OR (state = 'running' AND lease_expires_at < now()))"
            " AND (NOT $1 OR partition = '')",
            self.runners,
        )

    # --- reads ---

    async def waiting_line(self, recent: int = 20) -> tuple[list[tuple[str, str]], float]:
        """The open checks in the order workers claim them, as (check id, state), and the median run time in
        seconds of the latest ``recent`` finished checks (0: none finished yet)."""
        async with self.pool.acquire() as conn:
            rows = await conn.fetch(
                "SELECT check_id, state FROM verifier_checks WHERE state IN ('queued', 'running')"
                " ORDER BY enqueued_at, check_id"
            )
            median = await conn.fetchval(
                "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY s) FROM (SELECT extract(epoch FROM"
                " finished_at - started_at)::float8 AS s FROM verifier_checks WHERE finished_at IS NOT NULL"
                " AND started_at IS NOT NULL ORDER BY finished_at DESC LIMIT $1) recent",
                recent,
            )
        return [(str(r["check_id"]), r["state"]) for r in rows], float(median or 0.0)

    async def route_known(self, route: str) -> bool:
        """Whether the log names the route (its stream has an event): a filter on an unknown route is NOT_FOUND."""
        return bool(
            await self.pool.fetchval(
                "SELECT EXISTS (SELECT 1 FROM events WHERE stream = $1)", names.route_stream(route)
            )
        )

    async def get(self, check_id: str) -> CheckRow | None:
        rows = await self._rows("WHERE check_id = $1", check_id)
        return rows[0] if rows else None

    async def search(self, *, route: str = "", sha: str = "", limit: int = 100) -> list[CheckRow]:
        """Newest first, filtered by route and/or commit."""
        return await self._rows(
            "WHERE ($1 = '' OR route = $1) AND ($2 = '' OR sha = $2) ORDER BY enqueued_at DESC, check_id LIMIT $3",
            route,
            sha,
            limit,
        )

    async def _rows(self, where: str, *args) -> list[CheckRow]:
        async with self.pool.acquire() as conn:
            rows = await conn.fetch(f"SELECT {_ROW_COLUMNS} FROM verifier_checks {where}", *args)
            positions = [r["completed_position"] for r in rows if r["completed_position"] is not None]
            results = {}
            if positions:
                events = await conn.fetch(
                    "SELECT global_position, stream_version, envelope_head || payload FROM events"
                    " WHERE global_position = ANY($1::bigint[])",
                    positions,
                )
                results = {e[0]: decode_row(e).check_completed for e in events}
        return [
            CheckRow(
                item=item_of(r),
                state=r["state"],
                attempts=r["attempts"],
                claimed_by=r["claimed_by"],
                enqueued_at=r["enqueued_at"],
                started_at=r["started_at"],
                finished_at=r["finished_at"],
                result=results.get(r["completed_position"]),
                slurm_job_id=r["slurm_job_id"] or "",
                runner_node=r["runner_node"] or "",
            )
            for r in rows
        ]
