"""Checks on the runners: the queue's order and the dispatcher on a database of their own, and the runners'
partition on the real local Slurm (deploy/local/slurm/up.sh: the nodes runner1..3, AllowAccounts kb-runners). The
Slurm tests are skipped where SLURM_CONF is unset, except in CI, where they must run."""

import shutil
import tempfile
import uuid
from pathlib import Path

import pytest
from kernelboard.v1 import events_pb2

from services.common.eventlog import EventLog
from services.verifier import domain
from services.verifier.domain import CheckItem
from services.verifier.queue import CheckQueue
from tests.support.databases import database_fixture
from tests.support.slurm import skip_without_slurm
from tests.verifier.conftest import HostedRepo


def pytest_collection_modifyitems(config, items):
    skip_without_slurm(items)


database_url = database_fixture("runners", scope="function")


@pytest.fixture
async def log(database_url):
    event_log = await EventLog.connect(database_url, min_size=2, max_size=12)
    yield event_log
    await event_log.close()


@pytest.fixture
def home():
    path = Path(tempfile.mkdtemp(prefix="kb_test_runners_home_"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def repo(home) -> HostedRepo:
    return HostedRepo(home / "repo.git")


@pytest.fixture
async def queue(log):
    return CheckQueue(log, lease_s=30.0, runners=True)


def item(owner: str, route: str, sha: str, *, partition: str = "runners", supersede: bool = False) -> CheckItem:
    """A check of a route commit as the intake queues it (the commit need not exist for the queue's order)."""
    key = domain.dedupe_key(route, sha, "verify", "r" * 40)
    return CheckItem(
        check_id=domain.check_id_for(key),
        dedupe_key=key,
        check_name="verify",
        ref=f"refs/heads/routes/{route}",
        sha=sha,
        route=route,
        kind=events_pb2.COMMIT_KIND_ROUTE,
        job_id="",
        rules_commit="r" * 40,
        benchmark_version=2,
        script="checks/verify.sbatch",
        metrics_file="metrics.json",
        time_limit_s=60,
        trigger_event_id=str(uuid.uuid4()),
        owner=owner,
        partition=partition,
        supersede=supersede,
    )
