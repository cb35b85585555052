"""The board's service tests: a database of our own per module on the real PostgreSQL, migrated, with the real log."""

import os
import uuid

import asyncpg
import pytest

from services.common.eventlog import EventLog

ADMIN_URL = os.environ.get("KB_TEST_ADMIN_URL", "postgresql://root@127.0.0.1:5432/postgres")
NATS_URL = os.environ.get("KB_TEST_NATS_URL", "nats://127.0.0.1:4222")


async def _database():
    name = f"kb_test_board_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(ADMIN_URL)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        yield ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


@pytest.fixture(scope="module")
async def database():
    """The URL of a fresh database (``kb_test_board_<random>``), dropped after the module."""
    async for url in _database():
        yield url


@pytest.fixture
async def fresh_log():
    """A real event log on a database of its own, for one test."""
    async for url in _database():
        log = await EventLog.connect(url, migrate=True)
        yield log
        await log.close()
