"""The private stack's first state (``python -m tests.e2e.bootstrap``, settings from the environment): the
maintainer ``curator`` and the scheduler's identity with token files under KB_HOME, main from the project's files and
the tag ``checks`` on it at each version of the rules in turn, as ingest's seed approves them (``--rules-through N``:
stop at version N) — ingest's seed without its bundled route, through the same Ingest calls.

``--job-ids`` prints the Slurm job ids of every JobSubmitted in the log (to cancel what a failed test left behind).
"""

import argparse
import asyncio
import json

from kernelboard.v1 import events_pb2

from contracts import names
from services.common.config import Settings
from services.common.eventlog import EventLog
from services.ingest import domain
from services.ingest.app import Ingest
from services.ingest.domain import Actor
from services.ingest.seed import CURATOR, PROJECT, SeedReport, ensure_principal, ensure_rules, ensure_token
from services.ingest.server import hosted_repo


async def bootstrap(settings: Settings, rules_through: int | None = None) -> None:
    log = await EventLog.connect(settings.database_url, migrate=False)
    try:
        ingest = Ingest(log, hosted_repo(settings))
        await ingest.start()
        report = SeedReport()
        curator = await ensure_principal(ingest, CURATOR, domain.PERSON, events_pb2.ROLE_MAINTAINER, report)
        await ensure_principal(ingest, names.SCHEDULER, domain.SERVICE, events_pb2.ROLE_SIGNED_IN, report)
        await ensure_token(ingest, CURATOR, settings.home / "curator.token", report)
        await ensure_token(ingest, names.SCHEDULER, settings.home / "scheduler.token", report)
        await ensure_rules(ingest, Actor.of(curator), PROJECT, report, through_version=rules_through)
    finally:
        await log.close()


async def job_ids(settings: Settings) -> list[str]:
    log = await EventLog.connect(settings.database_url, migrate=False)
    try:
        return [e.job_submitted.job_id async for e in log.read_all(types={"JobSubmitted"})]
    finally:
        await log.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-ids", action="store_true")
    parser.add_argument("--rules-through", type=int, metavar="N", help="approve the rules up to version N only")
    args = parser.parse_args()
    settings = Settings.from_env()
    if args.job_ids:
        print(json.dumps(asyncio.run(job_ids(settings))))
    else:
        asyncio.run(bootstrap(settings, args.rules_through))


if __name__ == "__main__":
    main()
