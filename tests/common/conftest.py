"""A database of our own per test module on the real PostgreSQL, migrated, with the real event log on it."""

import pytest

from services.common.eventlog import EventLog
from tests.support.databases import database_fixture

database_url = database_fixture("common")


@pytest.fixture(scope="module")
async def event_log(database_url):
    log = await EventLog.connect(database_url, migrate=True)
    yield log
    await log.close()
