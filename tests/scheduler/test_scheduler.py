"""The scheduler end to end on the real Slurm, a real ingest and the scheduler as its own process.

The 1-minute TIMEOUT job is submitted first and checked last, so that its ~72 s overlap the other tests.
"""

import asyncio
import os
import subprocess
import time
import urllib.request

import grpc
import pytest
from kernelboard.v1 import ingest_pb2, scheduler_pb2

from services.common import auth
from tests.common.waiting import eventually
from tests.scheduler.conftest import git

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(420)]

LONG = "#!/bin/bash\nsleep 300\n"


def finished_with_result(job) -> bool:
    return job.finished and bool(job.result_sha)


def payload_types(events) -> list[str]:
    return [event.WhichOneof("payload") for event in events]


@pytest.fixture(scope="module")
async def timeout_job(stack):
    sha = await stack.push_script("alice", "fast", "timeout.sbatch", "#!/bin/bash\n#SBATCH --time=1\nsleep 300\n")
    return (await stack.submit("alice", "fast", sha, "timeout.sbatch")).job_id


async def test_a_job_that_writes_a_file_comes_back_as_a_commit(stack, timeout_job):
    script = (
        "#!/bin/bash\n#SBATCH --time=2\n#SBATCH --mem=512\n"
        "echo 42 > answer.txt\nhead -c 10000 /dev/zero > big.bin\necho noise > run.log\n"
    )
    sha = await stack.push_script("alice/agent-1", "fast", "write.sbatch", script, {".gitignore": "*.log\n"})
    job = await stack.submit("alice/agent-1", "fast", sha, "write.sbatch")
    assert (job.owner, job.submitted_by, job.held, job.route) == ("alice", "alice/agent-1", False, "fast")
    assert (job.resources.time_limit_s, job.resources.mem_mb, job.resources.cpus) == (120, 512, 1)

    job = await stack.wait_job(job.job_id, finished_with_result, 60, "finished with its result committed")
    assert (job.state, job.exit_code) == ("COMPLETED", 0)
    assert job.result_ref == f"refs/jobs/{job.job_id}"
    assert sorted(job.excluded) == [
        "routes/fast/big.bin (10000 bytes, over the 4096-byte limit)",
        "routes/fast/run.log (.gitignore)",
    ]
    repo = str(stack.home / "repo.git")
    assert (
        subprocess.check_output(["git", "--git-dir", repo, "show", f"{job.result_sha}:routes/fast/answer.txt"])
        == b"42\n"
    )
    assert (
        subprocess.check_output(["git", "--git-dir", repo, "rev-parse", f"{job.result_sha}^"]).decode().strip() == sha
    )
    # Ingest recorded it as a job commit, which is what starts the checks.
    ingested = [e.commit_ingested async for e in stack.log.read_all(types={"CommitIngested"})]
    job_commits = [c for c in ingested if c.ref == job.result_ref]
    assert len(job_commits) == 1 and job_commits[0].sha == job.result_sha and job_commits[0].job_id == job.job_id

    # Ingest appends its CommitIngested to the job's stream too, between the end and the scheduler's record of it.
    events = await stack.job_events(job.job_id)
    assert payload_types(events)[0] == "job_submitted"
    assert payload_types(events)[-3:] == ["job_finished", "commit_ingested", "job_result_committed"]
    finished = events[-3].job_finished
    assert finished.state == "COMPLETED" and finished.elapsed_s >= 0 and finished.cpu_seconds >= 0
    assert events[-1].job_result_committed.excluded == list(job.excluded)


async def test_a_failing_job_reports_its_exit_code(stack):
    sha = await stack.push_script("alice", "fast", "fail.sbatch", "#!/bin/bash\nexit 3\n")
    job = await stack.submit("alice", "fast", sha, "fail.sbatch")
    job = await stack.wait_job(job.job_id, finished_with_result, 60, "finished")
    assert (job.state, job.exit_code) == ("FAILED", 3)


@pytest.mark.parametrize(
    "directive, limit",
    [
        ("--time=61", "limits.partitions.main.max_time_s"),
        ("--cpus-per-task=8", "limits.partitions.main.cpus"),
        ("--mem=9G", "limits.partitions.main.mem_mb"),
        ("--gres=gpu:1", "limits.partitions.main.gpus"),
    ],
)
async def test_over_limit_requests_are_refused_before_sbatch(stack, directive, limit):
    name = f"over-{directive.strip('-').split('=')[0]}.sbatch"
    sha = await stack.push_script("alice", "fast", name, f"#!/bin/bash\n#SBATCH {directive}\ntrue\n")
    submitted_before = len([e async for e in stack.log.read_all(types={"JobSubmitted"})])
    dirs_before = sorted(stack.jobs_root.iterdir())
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stack.submit("alice", "fast", sha, name)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert limit in err.value.details() and name in err.value.details()
    # Refused before any job directory or sbatch: nothing was written anywhere.
    assert sorted(stack.jobs_root.iterdir()) == dirs_before
    assert len([e async for e in stack.log.read_all(types={"JobSubmitted"})]) == submitted_before


async def test_bad_requests_get_clear_statuses(stack):
    over_node = (os.cpu_count() or 1) + 1
    text = f"#!/bin/bash\n#SBATCH --cpus-per-task={over_node}\ntrue\n"
    await stack.push_script("alice", "fast", "over-node.sbatch", text)
    sha = await stack.push_script("alice", "fast", "ok.sbatch", "#!/bin/bash\ntrue\n")
    cases = [
        (("bob", "fast", sha, "ok.sbatch"), grpc.StatusCode.PERMISSION_DENIED, "belongs to alice"),
        (("alice", "fast", sha, "missing.sbatch"), grpc.StatusCode.NOT_FOUND, "no file"),
        (("alice", "fast", "f" * 40, "ok.sbatch"), grpc.StatusCode.FAILED_PRECONDITION, "kb push"),
        (("alice", "nowhere", sha, "ok.sbatch"), grpc.StatusCode.NOT_FOUND, "unknown route"),
    ]
    if over_node <= 4:  # within the rules' 4 CPUs but more than this node has: sbatch itself refuses it
        cases.append(
            (("alice", "fast", sha, "over-node.sbatch"), grpc.StatusCode.INVALID_ARGUMENT, "More processors requested")
        )
    for args, code, words in cases:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stack.submit(*args)
        assert err.value.code() == code and words in err.value.details(), err.value.details()
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stack.scheduler.SubmitJob(scheduler_pb2.SubmitJobRequest(ref="refs/heads/main", sha=sha, script_path="x"))
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_an_outsiders_job_waits_held_until_a_maintainer_releases_it(stack, slurm_conf):
    sha = await stack.push_script("mallory", "outside", "held.sbatch", "#!/bin/bash\necho ran > ran.txt\n")
    job = await stack.submit("mallory", "outside", sha, "held.sbatch")
    assert job.held and job.reason == "JobHeldAdmin"
    squeue = subprocess.check_output(
        ["squeue", "-h", "-j", job.job_id, "-o", "%T|%r"], env={**os.environ, "SLURM_CONF": slurm_conf}, text=True
    )
    assert squeue.strip() == "PENDING|JobHeldAdmin"
    await asyncio.sleep(3)  # several polls: it must not start on its own
    assert (await stack.job(job.job_id)).state == "PENDING" and (await stack.job(job.job_id)).held

    for who in ("mallory", "alice"):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stack.scheduler.ReleaseJob(scheduler_pb2.ReleaseJobRequest(job_id=job.job_id), metadata=stack.md(who))
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED and "maintainer" in err.value.details()

    released = await stack.scheduler.ReleaseJob(
        scheduler_pb2.ReleaseJobRequest(job_id=job.job_id), metadata=stack.md("curator")
    )
    assert not released.held and released.released_by == "curator"
    job = await stack.wait_job(job.job_id, finished_with_result, 60, "run after release")
    assert job.state == "COMPLETED"
    types = payload_types(await stack.job_events(job.job_id))
    assert types[:3] == ["job_submitted", "job_held", "job_released"] and types.count("job_finished") == 1


async def test_cancel_by_owner_or_maintainer_only(stack):
    sha = await stack.push_script("alice", "fast", "long.sbatch", LONG)
    job = await stack.submit("alice", "fast", sha, "long.sbatch")
    for who in ("bob", "mallory"):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stack.scheduler.CancelJob(scheduler_pb2.CancelJobRequest(job_id=job.job_id), metadata=stack.md(who))
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    await stack.scheduler.CancelJob(
        scheduler_pb2.CancelJobRequest(job_id=job.job_id), metadata=stack.md("alice/agent-1")
    )
    job = await stack.wait_job(job.job_id, finished_with_result, 60, "cancelled")
    assert job.state == "CANCELLED"
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stack.scheduler.CancelJob(scheduler_pb2.CancelJobRequest(job_id=job.job_id), metadata=stack.md("curator"))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION


async def test_watch_streams_every_change_to_the_end(stack):
    sha = await stack.push_script("alice", "fast", "short.sbatch", "#!/bin/bash\nsleep 2\n")
    job = await stack.submit("alice", "fast", sha, "short.sbatch")
    seen = []
    async for update in stack.scheduler.WatchJob(
        scheduler_pb2.GetJobRequest(job_id=job.job_id), metadata=stack.md("bob"), timeout=90
    ):
        seen.append(update)
    versions = [update.version for update in seen]
    assert versions == sorted(set(versions)) and seen[-1].finished and seen[-1].result_sha
    assert "RUNNING" in [update.state for update in seen]


async def test_the_scheduler_killed_mid_run_resumes_and_ends_every_job_once(stack, timeout_job):
    shas = {}
    for name, seconds in (("k1.sbatch", 4), ("k2.sbatch", 6)):
        shas[name] = await stack.push_script(
            "alice", "fast", name, f"#!/bin/bash\nsleep {seconds}\necho done > {name}.out\n"
        )
    jobs = [(await stack.submit("alice", "fast", sha, name)).job_id for name, sha in shas.items()]
    await stack.wait_job(jobs[0], lambda job: job.state == "RUNNING", 30, "running")

    stack.process.kill()
    await asyncio.sleep(8)  # jobs end while nobody follows them
    await stack.process.start()

    for job_id in [*jobs, timeout_job]:
        if job_id == timeout_job:
            continue
        job = await stack.wait_job(job_id, finished_with_result, 90, "finished after the restart")
        assert job.state == "COMPLETED"
    for job_id in jobs:
        types = payload_types(await stack.job_events(job_id))
        assert types.count("job_finished") == 1 and types.count("job_result_committed") == 1, types


async def test_metrics_show_jobs_by_state_and_sbatch_latency(stack):
    sha = await stack.push_script("alice", "fast", "refused.sbatch", "#!/bin/bash\n#SBATCH --uid=0\ntrue\n")
    with pytest.raises(grpc.aio.AioRpcError):
        await stack.submit("alice", "fast", sha, "refused.sbatch")  # counted, by its code
    port = stack.process.env["KB_SCHEDULER_METRICS_PORT"]
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert 'kb_scheduler_jobs{state="COMPLETED"}' in text
    assert "kb_scheduler_held_jobs" in text and "kb_scheduler_oldest_held_job_age_seconds" in text
    assert "kb_scheduler_sbatch_seconds_count" in text and "kb_scheduler_poll_errors_total" in text
    assert 'kb_scheduler_submit_refusals_total{code="INVALID_ARGUMENT"}' in text


async def test_a_one_minute_limit_ends_as_timeout(stack, timeout_job):
    started = time.monotonic()
    job = await stack.wait_job(timeout_job, finished_with_result, 150, "timed out")
    assert job.state == "TIMEOUT" and 55 <= job.elapsed_s <= 130, (job.state, job.elapsed_s, time.monotonic() - started)
    types = payload_types(await stack.job_events(timeout_job))
    assert types.count("job_finished") == 1


async def test_a_person_whose_join_is_accepted_is_no_longer_held_until_they_leave(stack, slurm_conf):
    """The scheduler (its own token cache) sees the role an accepted join gives as soon as the change's notice reaches
    it (milliseconds: the server that made the change, ingest, sees it at once; other servers through LISTEN)."""
    async with stack.log.pool.acquire() as conn:
        await auth.register_principal(conn, "hana", auth.PERSON, "hana", auth.SIGNED_IN, log=stack.log, actor="test")
        stack.tokens["hana"] = await auth.issue_token(conn, "hana")
    await stack.ingest.StartRoute(ingest_pb2.StartRouteRequest(route="hana-route"), metadata=stack.md("hana"))
    clone = stack.home / "clones" / "hana-route"
    git("clone", "-q", str(stack.home / "repo.git"), str(clone))
    git("checkout", "-q", "-b", "routes/hana-route", "origin/routes/hana-route", cwd=clone)
    stack.clones["hana-route"] = clone
    sha = await stack.push_script("hana", "hana-route", "quick.sbatch", "#!/bin/bash\necho ran > ran.txt\n")

    before = await stack.submit("hana", "hana-route", sha, "quick.sbatch")
    assert before.held
    await stack.ingest.RequestJoin(ingest_pb2.RequestJoinRequest(note="let me in"), metadata=stack.md("hana"))
    still = await stack.submit("hana", "hana-route", sha, "quick.sbatch")
    assert still.held, "asking is not joining"
    await stack.ingest.DecideJoin(ingest_pb2.DecideJoinRequest(name="hana", accept=True), metadata=stack.md("curator"))
    cancel = scheduler_pb2.CancelJobRequest

    async def submitted(held: bool):
        """A job submitted now, if the scheduler's token cache holds hana's new role yet (a notice, milliseconds)."""
        job = await stack.submit("hana", "hana-route", sha, "quick.sbatch")
        if job.held == held:
            return job
        await stack.scheduler.CancelJob(cancel(job_id=job.job_id), metadata=stack.md("curator"))
        return None

    member = await eventually(lambda: submitted(held=False), "hana's job unheld", timeout_s=5, interval_s=0.2)
    assert (await stack.wait_job(member.job_id, finished_with_result, 60, "a member's job runs")).state == "COMPLETED"

    await stack.ingest.LeaveProject(ingest_pb2.LeaveProjectRequest(), metadata=stack.md("hana"))
    after = await eventually(lambda: submitted(held=True), "hana's job held again", timeout_s=5, interval_s=0.2)
    for job in (before, still, after):
        await stack.scheduler.CancelJob(cancel(job_id=job.job_id), metadata=stack.md("curator"))
