"""Each test module gets its own PostgreSQL database and its own JetStream stream and subject prefix."""

import os
import secrets

import asyncpg
import pytest

from services.common.config import Settings
from services.common.eventlog import EventLog

SERVER_URL = os.environ.get("KB_TEST_POSTGRES_URL", "postgresql://root@127.0.0.1:5432")
NATS_URL = os.environ.get("KB_TEST_NATS_URL", "nats://127.0.0.1:4222")


@pytest.fixture(scope="module")
async def database_url():
    name = f"kb_test_log_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(f"{SERVER_URL}/postgres")
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        yield f"{SERVER_URL}/{name}"
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
    finally:
        await admin.close()


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
