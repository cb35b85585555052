"""Versioned SQL migrations: every ``services/*/migrations/NNNN_*.sql``, applied once each, in number order.

Each service owns a number range (common 0001-0099, ingest 0100-0199, ...), so one ordered list serves the whole
database. ``python -m services.common.migrate`` applies them to ``KB_DATABASE_URL``.
"""

import asyncio
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from services.common.logs import get_logger

SERVICES_DIR = Path(__file__).resolve().parents[1]
MIGRATION_NAME = re.compile(r"^(\d{4})_[A-Za-z0-9_]+\.sql$")
# Any fixed key works; every process that migrates takes this same session-level advisory lock.
MIGRATION_LOCK_KEY = 0x6B62_6D69_6772  # "kbmigr"

log = get_logger(component="migrate")


class MigrationError(Exception):
    pass


@dataclass(frozen=True)
class Migration:
    version: int
    path: Path

    @property
    def sql(self) -> str:
        return self.path.read_text()

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()


def discover(services_dir: Path = SERVICES_DIR) -> list[Migration]:
    migrations: dict[int, Migration] = {}
    for path in sorted(services_dir.glob("*/migrations/*.sql")):
        match = MIGRATION_NAME.match(path.name)
        if not match:
            raise MigrationError(f"{path}: a migration is named NNNN_words.sql")
        version = int(match.group(1))
        if version in migrations:
            raise MigrationError(f"migration number {version:04d} is used twice: {migrations[version].path} and {path}")
        migrations[version] = Migration(version, path)
    return [migrations[v] for v in sorted(migrations)]


async def apply_migrations(conn: asyncpg.Connection, services_dir: Path = SERVICES_DIR) -> list[int]:
    """Applies the migrations not yet applied, each in its own transaction; returns their numbers.

    Safe to call from several processes at once: they queue on an advisory lock and the later ones find nothing left.
    A migration edited after it was applied is an error (add a new one instead).
    """
    migrations = discover(services_dir)
    applied_now = []
    await conn.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK_KEY)
    try:
        await conn.execute(
            """CREATE TABLE IF NOT EXISTS schema_migrations (
                   version    integer     PRIMARY KEY,
                   name       text        NOT NULL,
                   checksum   text        NOT NULL,
                   applied_at timestamptz NOT NULL DEFAULT now())"""
        )
        applied = {r["version"]: r for r in await conn.fetch("SELECT version, name, checksum FROM schema_migrations")}
        for migration in migrations:
            done = applied.get(migration.version)
            if done is not None:
                if done["checksum"] != migration.checksum:
                    raise MigrationError(
                        f"migration {migration.path.name} changed after it was applied (as {done['name']}); "
                        "add a new migration instead of editing an applied one"
                    )
                continue
            async with conn.transaction():
                try:
                    await conn.execute(migration.sql)
                except asyncpg.PostgresError as err:
                    raise MigrationError(f"migration {migration.path} failed: {err}") from err
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                    migration.version,
                    migration.path.name,
                    migration.checksum,
                )
            applied_now.append(migration.version)
            log.info("migration_applied", version=migration.version, name=migration.path.name)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK_KEY)
    return applied_now


async def _main() -> None:
    from services.common.config import Settings

    conn = await asyncpg.connect(Settings.from_env().database_url)
    try:
        applied = await apply_migrations(conn)
        print(f"applied {len(applied)} migration(s): {applied}" if applied else "migrations: up to date")
    finally:
        await conn.close()


if __name__ == "__main__":
    asyncio.run(_main())
