"""Throwaway PostgreSQL databases for the tests and benchmarks: each suite makes its own (kb_test_<area>_<random>)
and drops it afterwards, so that suites can run side by side on one server. ``database_fixture`` is the one fixture
that gives a suite its database, as ``database_url``."""

import os
import secrets
from contextlib import asynccontextmanager

import asyncpg
import pytest

ADMIN_URL = os.environ.get("KB_TEST_PG_ADMIN", "postgresql://root@127.0.0.1:5432/postgres")


def database_url(name: str) -> str:
    return ADMIN_URL.rsplit("/", 1)[0] + "/" + name


async def create_database(area: str) -> tuple[str, str]:
    """A new empty database: its name and URL."""
    name = f"kb_test_{area}_{secrets.token_hex(5)}"
    conn = await asyncpg.connect(ADMIN_URL)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return name, database_url(name)


async def drop_database(name: str) -> None:
    conn = await asyncpg.connect(ADMIN_URL)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


@asynccontextmanager
async def throwaway_database(area: str):
    """The URL of a new database, dropped on the way out."""
    name, url = await create_database(area)
    try:
        yield url
    finally:
        await drop_database(name)


def database_fixture(area: str, scope: str = "module"):
    """A fixture yielding the URL of a new database (``kb_test_<area>_<random>``), dropped after ``scope``; a
    conftest names it ``database_url``."""

    @pytest.fixture(scope=scope)
    async def database_url():
        async with throwaway_database(area) as url:
            yield url

    return database_url
