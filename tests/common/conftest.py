"""A database of our own per test module on the real PostgreSQL, migrated, with the real event log on it."""

import os
import uuid

import asyncpg
import pytest

from services.common.eventlog import EventLog

ADMIN_URL = os.environ.get("KB_TEST_ADMIN_URL", "postgresql://root@127.0.0.1:5432/postgres")


def database_url(name: str) -> str:
    return ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture(scope="module")
async def database():
    """The URL of a fresh database (``kb_test_common_<random>``), dropped after the module."""
    name = f"kb_test_common_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(ADMIN_URL)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        yield database_url(name)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


@pytest.fixture(scope="module")
async def event_log(database):
    log = await EventLog.connect(database, migrate=True)
    yield log
    await log.close()
