"""Each test module gets its own PostgreSQL database and its own JetStream stream and subject prefix."""

import os
import secrets

import pytest

from services.common.config import Settings
from services.common.eventlog import EventLog
from tests.databases import throwaway_database

NATS_URL = os.environ.get("KB_TEST_NATS_URL", "nats://127.0.0.1:4222")


@pytest.fixture(scope="module")
async def database_url():
    async with throwaway_database("log") as url:
        yield url


@pytest.fixture(scope="module")
async def log(database_url):
    event_log = await EventLog.connect(database_url, min_size=2, max_size=12)
    yield event_log
    await event_log.close()


@pytest.fixture
async def settings(database_url):
    """Settings naming this test's own JetStream stream and subject prefix (deleted afterwards)."""
    from services.common import bus

    tag = secrets.token_hex(4)
    test_settings = Settings(
        database_url=database_url,
        nats_url=NATS_URL,
        events_stream=f"KB_TEST_LOG_{tag.upper()}",
        events_subject_prefix=f"kbtest.log{tag}",
    )
    yield test_settings
    nc = await bus.connect(test_settings)
    try:
        await bus.delete_stream(nc.jetstream(), test_settings)
    finally:
        await nc.close()


@pytest.fixture
async def js(settings):
    from services.common import bus

    nc = await bus.connect(settings)
    yield nc.jetstream()
    await nc.close()
