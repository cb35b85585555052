"""The verifier service as operators run it (``python -m services.verifier.server``, KB_VERIFIER_DISPATCH=slurm),
killed -9 while its check runs on a runner and started again: the new process adopts the check, follows the same
Slurm job (submitting nothing again) and appends one CheckCompleted."""

import asyncio
import os
import signal
import subprocess
import sys

import pytest

from contracts import runners
from tests.runners.runs import approve, finished, jobs_named, push
from tests.streams import delete_stream, stream_settings
from tests.support.services import free_port
from tests.verifier.conftest import REPO, metrics_script

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(240)]


@pytest.fixture
async def settings(database_url, home):
    settings = stream_settings("runners", database_url=database_url, home=home)
    yield settings
    await delete_stream(settings)


def verifier_process(settings, slurm_conf: str, log_path) -> subprocess.Popen:
    env = {
        **os.environ,
        "PYTHONPATH": f"{REPO}:{REPO / 'protos'}",
        "KB_DATABASE_URL": settings.database_url,
        "KB_HOME": str(settings.home),
        "KB_EVENTS_STREAM": settings.events_stream,
        "KB_EVENTS_SUBJECT_PREFIX": settings.events_subject_prefix,
        "KB_VERIFIER_PORT": str(free_port()),
        "KB_VERIFIER_METRICS_PORT": str(free_port()),
        "KB_VERIFIER_DEVICE": "cpu",
        "KB_VERIFIER_DISPATCH": "slurm",
        "SLURM_CONF": slurm_conf,
    }
    with open(log_path, "ab") as sink:
        return subprocess.Popen([sys.executable, "-m", "services.verifier.server"], env=env, cwd=REPO,
                                stdout=sink, stderr=subprocess.STDOUT)  # fmt: skip


async def wait_for(predicate, timeout_s: float, what: str, process: subprocess.Popen, log_path):
    for _ in range(int(timeout_s / 0.25)):
        if await predicate():
            return
        assert process.poll() is None, f"the verifier exited ({process.returncode}):\n{log_path.read_text()[-3000:]}"
        await asyncio.sleep(0.25)
    raise AssertionError(f"{what} not within {timeout_s} s:\n{log_path.read_text()[-3000:]}")


async def test_a_verifier_killed_mid_dispatch_follows_its_job_after_a_restart(
    log, queue, repo, settings, slurm_conf, tmp_path
):
    rules_sha = await approve(log, queue, repo, metrics_script("sleep 10"))
    [check_id] = await push(log, queue, repo, rules_sha)
    log_path = tmp_path / "verifier.log"
    first = verifier_process(settings, slurm_conf, log_path)
    try:

        async def running_on_a_node():
            row = await queue.get(check_id)
            return row.state == "running" and row.runner_node

        await wait_for(running_on_a_node, 60, "the check running on a runner", first, log_path)
        job = (await queue.get(check_id)).slurm_job_id
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    second = verifier_process(settings, slurm_conf, log_path)
    try:
        await wait_for(lambda: finished(queue, [check_id]), 90, "the check to end", second, log_path)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=30)
    row = await queue.get(check_id)
    assert row.state == "passed" and row.result.attempts == 1, list(row.result.reasons)
    assert row.result.verifier_host.startswith("runner")
    assert jobs_named(slurm_conf, runners.check_job_name(check_id, 1)) == [job]  # the same job, followed
    assert len(await log.read_stream(f"check:{check_id}")) == 2  # CheckRequested and one CheckCompleted
    assert "dispatcher adopted the checks of a dispatcher that is gone" in log_path.read_text()
