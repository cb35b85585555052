"""Migrations: number order, once each, safe under concurrent starts, an edited applied migration refused."""

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest

from services.common.migrate import MigrationError, apply_migrations, discover

pytestmark = pytest.mark.timeout(60)


def write(root, service, name, sql):
    folder = root / service / "migrations"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(sql)


async def test_the_projects_migrations_are_numbered_uniquely_and_0001_is_the_event_log():
    migrations = discover()
    assert migrations[0].version == 1 and migrations[0].path.name == "0001_event_log.sql"
    assert [m.version for m in migrations] == sorted({m.version for m in migrations})


async def test_apply_in_number_order_once_even_from_concurrent_processes(database_url, tmp_path):
    write(tmp_path, "zeta", "0002_second.sql", "INSERT INTO steps VALUES ('second');")
    write(tmp_path, "alpha", "0101_third.sql", "INSERT INTO steps VALUES ('third');")
    write(tmp_path, "beta", "0001_first.sql", "CREATE TABLE steps (name text); INSERT INTO steps VALUES ('first');")
    conns = [await asyncpg.connect(database_url) for _ in range(3)]
    try:
        await conns[0].execute("DROP TABLE IF EXISTS schema_migrations; DROP TABLE IF EXISTS steps")
        results = await asyncio.gather(*[apply_migrations(c, tmp_path) for c in conns])
        assert sorted(results, key=len) == [[], [], [1, 2, 101]]
        assert [r["name"] for r in await conns[0].fetch("SELECT name FROM steps")] == ["first", "second", "third"]
        assert await apply_migrations(conns[0], tmp_path) == []

        write(tmp_path, "zeta", "0002_second.sql", "INSERT INTO steps VALUES ('edited');")
        with pytest.raises(MigrationError, match="0002_second.sql changed after it was applied"):
            await apply_migrations(conns[0], tmp_path)

        write(tmp_path, "zeta", "0002_second.sql", "INSERT INTO steps VALUES ('second');")
        write(tmp_path, "zeta", "0003_broken.sql", "INSERT INTO steps VALUES ('half'); SELECT nonsense;")
        with pytest.raises(MigrationError, match="0003_broken.sql failed"):
            await apply_migrations(conns[0], tmp_path)
        assert await conns[0].fetchval("SELECT count(*) FROM steps WHERE name = 'half'") == 0
        assert await conns[0].fetchval("SELECT max(version) FROM schema_migrations") == 101
    finally:
        await conns[0].execute("DROP TABLE IF EXISTS schema_migrations; DROP TABLE IF EXISTS steps")
        for c in conns:
            await c.close()


async def test_a_misnamed_or_doubly_numbered_migration_is_refused(tmp_path):
    write(tmp_path, "a", "1_x.sql", "")
    with pytest.raises(MigrationError, match="NNNN_words.sql"):
        discover(tmp_path)
    (tmp_path / "a" / "migrations" / "1_x.sql").unlink()
    write(tmp_path, "a", "0005_x.sql", "")
    write(tmp_path, "b", "0005_y.sql", "")
    with pytest.raises(MigrationError, match="0005 is used twice"):
        discover(tmp_path)


def test_the_migrate_command_applies_the_projects_migrations_once(database_url):
    repo = Path(__file__).resolve().parents[2]
    env = dict(os.environ, KB_DATABASE_URL=database_url, PYTHONPATH=f"{repo}{os.pathsep}{repo / 'protos'}")
    command = [sys.executable, "-m", "services.common.migrate"]
    first = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    assert f"applied {len(discover())} migration(s)" in first.stdout
    again = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and "migrations: up to date" in again.stdout
