"""`python -m services.ingest.seed` as `make up` runs it: on a fresh database and KB_HOME, then again (no change)."""

import asyncio
import json
import os
import sys

from services.common.eventlog import EventLog
from services.ingest import store
from services.ingest.gitrepo import HostedRepo
from tests.databases import create_database, drop_database


async def run_seed(env) -> dict:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "services.ingest.seed",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return json.loads(out)


async def test_seed_module_seeds_once(tmp_path):
    name, url = await create_database("ingest")
    try:
        env = {
            **os.environ,
            "KB_DATABASE_URL": url,
            "KB_HOME": str(tmp_path),
            "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        }
        first = await run_seed(env)
        assert {"principal curator", "principal system:scheduler", "principal system:web", "route triton"} <= set(
            first["created"]
        )
        assert any(item.startswith("main ") for item in first["created"])
        assert first["tokens"] == {
            "curator": str(tmp_path / "curator.token"),
            "system:scheduler": str(tmp_path / "scheduler.token"),
            "system:web": str(tmp_path / "web.token"),
        }
        assert (await run_seed(env))["created"] == []
        log = await EventLog.connect(url)
        try:
            refs = await store.ref_values(log.pool)
            assert await HostedRepo(tmp_path / "repo.git").refs() == refs
            assert {"refs/heads/main", "refs/tags/checks", "refs/heads/routes/triton"} <= set(refs)
        finally:
            await log.close()
    finally:
        await drop_database(name)
