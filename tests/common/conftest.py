"""A database of our own per test module on the real PostgreSQL, migrated, with the real event log on it."""

import pytest

from services.common.eventlog import EventLog
from tests.databases import throwaway_database


@pytest.fixture(scope="module")
async def database():
    """The URL of a fresh database (``kb_test_common_<random>``), dropped after the module."""
    async with throwaway_database("common") as url:
        yield url


@pytest.fixture(scope="module")
async def event_log(database):
    log = await EventLog.connect(database, migrate=True)
    yield log
    await log.close()
