"""Throwaway PostgreSQL databases for the scheduler's tests (kb_test_scheduler_<random>), dropped afterwards."""

import os
import uuid

import asyncpg

PG_ADMIN = os.environ.get("KB_TEST_PG_ADMIN", "postgresql://root@127.0.0.1:5432/postgres")


async def create_database() -> tuple[str, str]:
    name = f"kb_test_scheduler_{uuid.uuid4().hex[:10]}"
    conn = await asyncpg.connect(PG_ADMIN)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return name, PG_ADMIN.rsplit("/", 1)[0] + "/" + name


async def drop_database(name: str) -> None:
    conn = await asyncpg.connect(PG_ADMIN)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()
