"""The verifier's consumer handler: follows the rules (RulesApproved) and queues the checks of every route or job
commit (CommitIngested), inside the consumer's transaction, so that a redelivered event queues nothing twice."""

import asyncpg
from kernelboard.v1 import events_pb2

from contracts import names
from contracts.rules import RulesError, parse
from services.common.eventlog import EventLog
from services.common.logs import bind_ids, get_logger
from services.verifier import domain
from services.verifier.queue import CheckQueue
from services.verifier.runnerqueue import RunnerQueue

EVENT_TYPES = frozenset({"CommitIngested", "RulesApproved"})
CONSUMER_NAME = "verifier"

log = get_logger()


class Intake:
    def __init__(self, log: EventLog, queue: CheckQueue):
        self.log = log
        self.queue = queue
        self.runners = RunnerQueue(queue)

    async def handle(self, conn: asyncpg.Connection, event: events_pb2.Event) -> None:
        payload = event.WhichOneof("payload")
        with bind_ids(event_id=event.event_id):
            if payload == "rules_approved":
                await self._rules_approved(conn, event)
            elif payload == "commit_ingested":
                await self._commit_ingested(conn, event)

    async def _rules_approved(self, conn: asyncpg.Connection, event: events_pb2.Event) -> None:
        approved = event.rules_approved
        try:
            rules = parse(approved.rules_json)
        except RulesError as err:
            # Ingest validates before it moves the tag; rules that still fail here keep the previous ones judging.
            log.error(
                "rules not valid; the previous rules keep judging", rules_commit=approved.rules_commit, error=str(err)
            )
            return
        await self.queue.save_rules(
            conn, approved.rules_commit, rules.benchmark_version, approved.rules_json, event.global_position
        )
        log.info("rules followed", rules_commit=approved.rules_commit, checks=[c.name for c in rules.checks])

    async def _commit_ingested(self, conn: asyncpg.Connection, event: events_pb2.Event) -> None:
        commit = event.commit_ingested
        if commit.kind not in domain.CHECKED_KINDS:
            return
        with bind_ids(sha=commit.sha, route=commit.route or None, job_id=commit.job_id or None):
            approved = await self.queue.current_rules(conn)
            if approved is None:
                log.warning("commit not checked: no rules approved yet (tag checks)", ref=commit.ref)
                return
            route = commit.route
            if commit.kind == events_pb2.COMMIT_KIND_JOB and not route:
                route = domain.route_of_job(await self.log.read_stream(names.job_stream(commit.job_id)))
            items = domain.checks_for_commit(commit, event.event_id, approved, route)
            queued = await self.queue.enqueue(conn, items)
            superseded = [dropped for item in queued for dropped in await self.runners.supersede(conn, item)]
            log.info(
                "checks queued",
                ref=commit.ref,
                rules_commit=approved.rules_commit,
                queued=[i.check_id for i in queued],
                already_queued=len(items) - len(queued),
                superseded=superseded,
            )
