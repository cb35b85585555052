"""Following jobs with the real log and the real Slurm: a failed poll concludes nothing, and two schedulers polling
the same job at once still record its end exactly once (the append's expected version)."""

import asyncio
import time

import pytest
from kernelboard.v1 import events_pb2

from services.common.eventlog import EventLog, NewEvent
from services.common.slurm import Slurm
from services.scheduler.jobdir import HostedRepo
from services.scheduler.jobs import POLL_ERRORS, JobService, SchedulerConfig
from tests.support.databases import create_database, drop_database

pytestmark = pytest.mark.slurm


@pytest.fixture
async def event_log():
    name, url = await create_database("scheduler")
    log = await EventLog.connect(url, min_size=1, max_size=3)
    yield log
    await log.close()
    await drop_database(name)


async def record_submitted(event_log, job_id: str, work_dir: str) -> None:
    submitted = events_pb2.JobSubmitted(
        job_id=job_id, route="fast", owner="alice", submitted_by="alice", work_dir=work_dir
    )
    await event_log.append(f"job:{job_id}", 0, [NewEvent(submitted, "alice")])


def service(event_log, slurm: Slurm, home) -> JobService:
    # Result commits are not part of these tests: no ingest is given, and none is reached before a job's end.
    return JobService(event_log, slurm, HostedRepo(home / "repo.git"), pusher=None, config=SchedulerConfig(home=home))


async def test_a_failed_poll_concludes_nothing(event_log, tmp_path):
    (tmp_path / "slurm.conf").write_text("ClusterName=gone\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=1\n")
    await record_submitted(event_log, "900001", str(tmp_path))
    jobs = service(event_log, Slurm(str(tmp_path / "slurm.conf"), timeout_s=15), tmp_path)
    await jobs.load()
    errors_before = POLL_ERRORS._value.get()
    assert await jobs.poll_once() is False
    assert POLL_ERRORS._value.get() == errors_before + 1
    assert [e.WhichOneof("payload") for e in await event_log.read_stream("job:900001")] == ["job_submitted"]
    assert not jobs.jobs["900001"].finished


async def test_two_schedulers_record_one_end(event_log, slurm_conf, tmp_path):
    slurm = Slurm(slurm_conf)
    (tmp_path / "job.sh").write_text("#!/bin/bash\nexit 5\n")
    job_id = await slurm.submit(str(tmp_path / "job.sh"), str(tmp_path), job_name="kb-test-follow", hold=False)
    await record_submitted(event_log, job_id, str(tmp_path))
    first, second = service(event_log, slurm, tmp_path), service(event_log, slurm, tmp_path)
    await first.load()
    await second.load()
    deadline = time.monotonic() + 60
    while not (first.jobs[job_id].finished and second.jobs[job_id].finished):
        assert time.monotonic() < deadline, "the job did not end within 60 s"
        await asyncio.gather(first.poll_once(), second.poll_once())
        await asyncio.sleep(0.2)
    events = await event_log.read_stream(f"job:{job_id}")
    finished = [e.job_finished for e in events if e.WhichOneof("payload") == "job_finished"]
    assert len(finished) == 1 and (finished[0].state, finished[0].exit_code) == ("FAILED", 5)
    assert first.jobs[job_id].version == second.jobs[job_id].version == len(events)
