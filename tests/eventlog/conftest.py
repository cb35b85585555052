"""Each test module gets its own PostgreSQL database and its own JetStream stream and subject prefix."""

import pytest

from services.common.eventlog import EventLog
from tests.streams import throwaway_stream
from tests.support.databases import database_fixture

database_url = database_fixture("log")


@pytest.fixture(scope="module")
async def log(database_url):
    event_log = await EventLog.connect(database_url, min_size=2, max_size=12)
    yield event_log
    await event_log.close()


@pytest.fixture
async def settings(database_url):
    """Settings naming this test's own JetStream stream and subject prefix (deleted afterwards)."""
    async with throwaway_stream("log", database_url=database_url) as test_settings:
        yield test_settings


@pytest.fixture
async def js(settings):
    from services.common import bus

    nc = await bus.connect(settings)
    yield nc.jetstream()
    await nc.close()
