"""`python -m services.ingest.seed` as `make up` runs it: on a fresh database and KB_HOME, then again (no change)."""

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from services.common.eventlog import EventLog
from services.ingest import store
from services.ingest.gitrepo import HostedRepo
from tests.support.databases import create_database, drop_database

ROOT = Path(__file__).resolve().parents[2]


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


def project_copy(root: Path, v2_run: dict | None) -> Path:
    """The files the seed reads, copied into ``root``; with ``v2_run``, a recorded version 2 run at V2_RUN's path."""
    from services.ingest.seed import EARLIER_RULES, PROJECT, V1_RUN, V2_RUN

    for relative in ("scienceslack.json", "AGENTS.md", "kernels", "checks", V1_RUN.path, *EARLIER_RULES):
        source, target = PROJECT / relative, root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, target)
    if v2_run is not None:
        (root / V2_RUN.path).parent.mkdir(parents=True, exist_ok=True)
        (root / V2_RUN.path).write_text(json.dumps(v2_run))
    return root


async def seeded_log(tmp_path: Path, project: Path) -> list:
    """Seed a fresh database from ``project`` twice (the second changes nothing) and return its log."""
    from services.ingest.app import Ingest
    from services.ingest.seed import seed

    name, url = await create_database("ingest")
    try:
        log = await EventLog.connect(url)
        try:
            ingest = Ingest(log, HostedRepo(tmp_path / "home" / "repo.git"))
            await ingest.start()
            await seed(ingest, tmp_path / "home", project)
            assert (await seed(ingest, tmp_path / "home", project)).created == []
            await ingest.stop()
            return [event async for event in log.read_all(0)]
        finally:
            await log.close()
    finally:
        await drop_database(name)


def of_type(events, kind: str) -> list:
    return [getattr(e, kind) for e in events if e.WhichOneof("payload") == kind]


async def test_the_seed_approves_version_1_with_its_report_then_raises_to_version_2(tmp_path):
    """As history did: the rules of version 1 and the route's recorded version 1 report on board 1, then the raise;
    without a recorded version 2 run the route reaches board 2 by a merge of main (checked there) and no score."""
    events = await seeded_log(tmp_path, project_copy(tmp_path / "project", None))
    assert [r.benchmark_version for r in of_type(events, "rules_approved")] == [1, 2]
    reports = of_type(events, "metrics_reported")
    assert [(r.route, r.benchmark_version, r.by_maintainer, r.reporter) for r in reports] == [
        ("triton", 1, True, "curator")
    ]
    v1_run = json.loads(
        (tmp_path / "project" / "bench/harness/route_triton/after_issue8/route_triton_1.json").read_text()
    )
    assert reports[0].score == v1_run["score"] and reports[0].runner == "NVIDIA H200"
    route_commits = [c for c in of_type(events, "commit_ingested") if c.route == "triton"]
    assert len(route_commits) == 2  # version 1's commit, then main merged in after the raise
    positions = {e.WhichOneof("payload") + e.commit_ingested.sha: e.global_position for e in events}
    raise_at = [e.global_position for e in events if e.WhichOneof("payload") == "rules_approved"][1]
    assert positions["commit_ingested" + route_commits[1].sha] > raise_at


async def test_the_seed_reports_the_recorded_version_2_run_and_refuses_a_run_of_other_rules(tmp_path):
    from services.ingest.seed import RecordedRunError

    v1_run = json.loads((ROOT / "bench/harness/route_triton/after_issue8/route_triton_1.json").read_text())
    # A test's own file: the seed must carry whatever the recorded run says, its interval included.
    v2_run = {
        **v1_run,
        "verifier_version": 2,
        "benchmark_version": 2,
        "timing_protocol": "cold-device-blocking",
        "score": 4.25,
        "score_interval": [4.2, 4.3],
        "measured_at": "2026-12-08T10:00:00Z",
    }
    events = await seeded_log(tmp_path / "a", project_copy(tmp_path / "a" / "project", v2_run))
    reports = of_type(events, "metrics_reported")
    assert [(r.benchmark_version, r.score) for r in reports] == [(1, v1_run["score"]), (2, 4.25)]
    assert (reports[1].score_low, reports[1].score_high, reports[1].measured_at) == (4.2, 4.3, "2026-12-08T10:00:00Z")

    v1_timed = {**v2_run, "timing_protocol": "cold-host-launch"}
    with pytest.raises(RecordedRunError, match="timed by 'cold-host-launch'"):
        await seeded_log(tmp_path / "b", project_copy(tmp_path / "b" / "project", v1_timed))
