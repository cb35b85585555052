"""The check queue as the Slurm dispatcher uses it (dispatch.py): which queued check of a partition goes next (fair
between owners), the dispatched checks a dispatcher follows, and giving one back to the queue when its runner was
lost. Same table as queue.py (migrations 0300, 0301); completion goes through CheckQueue.complete, once.

Fairness: the next check is the queued one whose owner (the person a push was for) has the fewest checks on the
runners now, then whose owner was dispatched to longest ago (never: first), then the oldest. One agent's 50 queued
pushes therefore take turns with another's one instead of going first. A dispatcher submits only as many jobs as
its partition has runners up, so the order is the verifier's, not Slurm's queue.
"""

from dataclasses import dataclass
from datetime import datetime

import asyncpg

from services.verifier import domain
from services.verifier.queue import ITEM_COLUMNS, NOTIFY_CHANNEL, CheckQueue, Claim, item_of


@dataclass(frozen=True)
class Dispatched:
    """A check this dispatcher follows on Slurm."""

    claim: Claim
    slurm_job_id: str  # "" between its claim and the job's record (or after a restart there)
    runner_node: str
    dispatched_at: datetime
    running_at: datetime | None
    lost_on: tuple[str, ...] = ()  # nodes an earlier attempt was lost on


class RunnerQueue:
    def __init__(self, queue: CheckQueue):
        self.queue = queue
        self.pool = queue.pool
        self.lease_s = queue.lease_s

    async def partitions(self) -> list[str]:
        """The partitions with checks queued or dispatched."""
        rows = await self.pool.fetch(
            "SELECT DISTINCT partition FROM verifier_checks WHERE state IN ('queued', 'running') AND partition <> ''"
        )
        return sorted(r["partition"] for r in rows)

    async def claim_next(self, dispatcher: str, partition: str) -> Claim | None:
        """The next queued check of the partition by the fairness order (module doc), claimed for dispatch."""
        async with self.pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                f"""UPDATE verifier_checks SET state = 'running', claimed_by = $1, attempts = attempts + 1,
                        lease_expires_at = now() + make_interval(secs => $2), heartbeat_at = now(),
                        started_at = coalesce(started_at, now()), dispatched_at = now(), running_at = NULL,
                        slurm_job_id = NULL, runner_node = NULL
                    WHERE check_id = (
                        SELECT c.check_id FROM verifier_checks c
                        WHERE c.state = 'queued' AND c.partition = $3
                        ORDER BY (SELECT count(*) FROM verifier_checks r
                                  WHERE r.state = 'running' AND r.partition = $3 AND r.owner = c.owner),
                                 (SELECT max(d.dispatched_at) FROM verifier_checks d
                                  WHERE d.partition = $3 AND d.owner = c.owner) NULLS FIRST,
                                 c.enqueued_at, c.check_id
                        FOR UPDATE SKIP LOCKED LIMIT 1)
                    RETURNING {ITEM_COLUMNS}, attempts""",
                dispatcher,
                self.lease_s,
                partition,
            )
            if row is None:
                return None
            await conn.execute("SELECT pg_notify($1, $2)", NOTIFY_CHANNEL, str(row["check_id"]))
        return Claim(item_of(row), row["attempts"])

    async def record_job(self, check_id: str, dispatcher: str, job_id: str) -> bool:
        return bool(
            await self.pool.fetchval(
                "UPDATE verifier_checks SET slurm_job_id = $3 WHERE check_id = $1 AND claimed_by = $2"
                " AND state = 'running' RETURNING true",
                check_id,
                dispatcher,
                job_id,
            )
        )

    async def mark_running(self, check_id: str, dispatcher: str, node: str) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            changed = await conn.fetchval(
                "UPDATE verifier_checks SET runner_node = $3, running_at = coalesce(running_at, now())"
                " WHERE check_id = $1 AND claimed_by = $2 AND runner_node IS DISTINCT FROM $3 RETURNING true",
                check_id,
                dispatcher,
                node,
            )
            if changed:
                await conn.execute("SELECT pg_notify($1, $2)", NOTIFY_CHANNEL, check_id)

    async def renew(self, dispatcher: str) -> None:
        """Renews the lease of every check this dispatcher follows (one statement a poll)."""
        await self.pool.execute(
            "UPDATE verifier_checks SET lease_expires_at = now() + make_interval(secs => $2), heartbeat_at = now()"
            " WHERE claimed_by = $1 AND state = 'running'",
            dispatcher,
            self.lease_s,
        )

    async def adopt(self, dispatcher: str, dead: list[str]) -> int:
        """Takes over the dispatched checks of dispatchers that are gone: those named in ``dead`` (this host's, whose
        process is no more) and any whose lease ran out. Their attempt and Slurm job are kept: the job is followed,
        not run again."""
        return len(
            await self.pool.fetch(
                "UPDATE verifier_checks SET claimed_by = $1, lease_expires_at = now() + make_interval(secs => $2)"
                " WHERE state = 'running' AND partition <> '' AND claimed_by <> $1"
                " AND (claimed_by = ANY($3::text[]) OR lease_expires_at < now()) RETURNING check_id",
                dispatcher,
                self.lease_s,
                dead,
            )
        )

    async def dispatchers(self) -> list[str]:
        """The dispatchers that hold checks now."""
        rows = await self.pool.fetch(
            "SELECT DISTINCT claimed_by FROM verifier_checks WHERE state = 'running' AND partition <> ''"
        )
        return [r["claimed_by"] for r in rows]

    async def in_flight(self, dispatcher: str) -> list[Dispatched]:
        rows = await self.pool.fetch(
            f"SELECT {ITEM_COLUMNS}, attempts, slurm_job_id, runner_node, dispatched_at, running_at, lost_on"
            " FROM verifier_checks WHERE claimed_by = $1 AND state = 'running' ORDER BY dispatched_at",
            dispatcher,
        )
        return [
            Dispatched(
                Claim(item_of(r), r["attempts"]),
                r["slurm_job_id"] or "",
                r["runner_node"] or "",
                r["dispatched_at"],
                r["running_at"],
                tuple(r["lost_on"]),
            )
            for r in rows
        ]

    async def requeue(self, check_id: str, dispatcher: str, *, count_attempt: bool = True, lost_on: str = "") -> bool:
        """Back to the queue: its runner was lost (the attempt counts; lost_on: the node, which its next attempts
        avoid) or its job never reached Slurm (it does not: count_attempt False)."""
        async with self.pool.acquire() as conn, conn.transaction():
            done = await conn.fetchval(
                "UPDATE verifier_checks SET state = 'queued', claimed_by = NULL, lease_expires_at = NULL,"
                " slurm_job_id = NULL, runner_node = NULL, running_at = NULL,"
                " attempts = CASE WHEN $3 THEN attempts ELSE greatest(attempts - 1, 0) END,"
                " lost_on = CASE WHEN $4 = '' OR $4 = ANY(lost_on) THEN lost_on ELSE lost_on || $4 END"
                " WHERE check_id = $1 AND claimed_by = $2 AND state = 'running' RETURNING true",
                check_id,
                dispatcher,
                count_attempt,
                lost_on,
            )
            if done:
                await conn.execute("SELECT pg_notify($1, $2)", NOTIFY_CHANNEL, check_id)
        return bool(done)

    async def supersede(self, conn: asyncpg.Connection, newer: domain.CheckItem) -> list[str]:
        """In the intake's transaction: the route's still-queued checks of the same check, from older commits, end
        failed naming the newer commit (only where the rules say so: checks[].supersede)."""
        if not newer.supersede or not newer.route:
            return []
        rows = await conn.fetch(
            f"SELECT {ITEM_COLUMNS} FROM verifier_checks WHERE state = 'queued' AND route = $1 AND check_name = $2"
            " AND check_id <> $3 AND sha <> $4 ORDER BY enqueued_at FOR UPDATE",
            newer.route,
            newer.check_name,
            newer.check_id,
            newer.sha,
        )
        dropped = []
        for row in rows:
            if await self.queue.complete_in(conn, str(row["check_id"]), domain.superseded(item_of(row), newer.sha)):
                dropped.append(str(row["check_id"]))
        return dropped

    async def lost_on(self, check_id: str) -> list[str]:
        return list(await self.pool.fetchval("SELECT lost_on FROM verifier_checks WHERE check_id = $1", check_id))

    async def waiting(self) -> dict[str, tuple[int, float]]:
        """Per partition: checks queued, and the age in seconds of the oldest (0: none)."""
        rows = await self.pool.fetch(
            "SELECT partition, count(*) AS n, extract(epoch FROM now() - min(enqueued_at))::float8 AS age"
            " FROM verifier_checks WHERE state = 'queued' AND partition <> '' GROUP BY partition"
        )
        return {r["partition"]: (r["n"], r["age"]) for r in rows}
