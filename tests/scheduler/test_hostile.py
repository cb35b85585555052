"""Hostile input to the scheduler (issue 12): each case ends with a documented status and a short message, submits
nothing, and the scheduler keeps serving; a job event it cannot fold does not stop it from starting."""

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from kernelboard.v1 import events_pb2, scheduler_pb2

from services.common.eventlog import NewEvent

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(300)]

SHORT = 1024
SHA = "0" * 40


async def refused(stack, call, code: grpc.StatusCode) -> str:
    before = await stack.log.head_position()
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    assert info.value.code() == code, info.value.details()
    assert len(info.value.details()) <= SHORT, f"{len(info.value.details())} characters echoed back"
    assert await stack.log.head_position() == before, "a refused request appended to the log"
    return info.value.details()


async def serving(stack) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{stack.process.port}") as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""))
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_job_ids_are_matched_in_full_and_echoed_short(stack):
    md = stack.md("alice")
    for job_id in ("1" * 200_000, "x" * 200_000, "1\n", "01", "-1", "1 OR 1=1", ""):
        request = scheduler_pb2.GetJobRequest(job_id=job_id)
        await refused(stack, stack.scheduler.GetJob(request, metadata=md), grpc.StatusCode.INVALID_ARGUMENT)
        for method in (stack.scheduler.CancelJob, stack.scheduler.ReleaseJob):
            rpc = method(scheduler_pb2.CancelJobRequest(job_id=job_id), metadata=stack.md("curator"))
            await refused(stack, rpc, grpc.StatusCode.INVALID_ARGUMENT)
    stream = stack.scheduler.WatchJob(scheduler_pb2.GetJobRequest(job_id="9" * 100_000), metadata=md)
    await refused(stack, stream.read(), grpc.StatusCode.INVALID_ARGUMENT)
    await refused(
        stack,
        stack.scheduler.GetJob(scheduler_pb2.GetJobRequest(job_id="999999"), metadata=md),
        grpc.StatusCode.NOT_FOUND,
    )
    await serving(stack)


async def test_submit_fields_are_checked_before_anything_runs(stack):
    md = stack.md("alice")
    cases = [
        ("refs/heads/routes/fast\n", SHA, "routes/fast/a.sbatch"),
        ("refs/heads/routes/" + "f" * 100_000, SHA, "routes/fast/a.sbatch"),
        ("refs/heads/main", SHA, "routes/fast/a.sbatch"),
        ("refs/heads/routes/fast", SHA + "\n", "routes/fast/a.sbatch"),
        ("refs/heads/routes/fast", SHA, "routes/fast/a\x00.sbatch"),
        ("refs/heads/routes/fast", SHA, "p" * 3_000_000),
    ]
    for ref, sha, path in cases:
        request = scheduler_pb2.SubmitJobRequest(ref=ref, sha=sha, script_path=path)
        await refused(stack, stack.scheduler.SubmitJob(request, metadata=md), grpc.StatusCode.INVALID_ARGUMENT)
    for route, owner in (("fast\n", ""), ("", "alice\n"), ("r" * 100_000, "")):
        request = scheduler_pb2.ListJobsRequest(route=route, owner=owner)
        await refused(stack, stack.scheduler.ListJobs(request, metadata=md), grpc.StatusCode.INVALID_ARGUMENT)
    await serving(stack)


async def test_an_undecodable_request_is_invalid_argument(stack):
    async with grpc.aio.insecure_channel(f"127.0.0.1:{stack.process.port}") as channel:
        for method in ("SubmitJob", "GetJob", "CancelJob", "ListJobs"):
            call = channel.unary_unary(f"/kernelboard.v1.Scheduler/{method}")
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await call(b"\xff\xff\xff\xff\x0f", metadata=stack.md("alice"))
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (method, info.value.details())
    await serving(stack)


async def test_the_scheduler_starts_with_a_job_event_it_cannot_fold(stack):
    # A job stream whose id is not a Slurm job id, as an older version or a hand could write it: the scheduler must
    # start, leave it aside, and never hand it to sacct (a bad id there would fail every poll of every job).
    bad = events_pb2.JobSubmitted(job_id="x\n", route="fast", ref="refs/heads/routes/fast", sha=SHA, owner="alice")
    await stack.log.append("job:x\n", None, [NewEvent(bad, actor="old-code")])
    stack.process.stop()
    await stack.process.start()
    listed = await stack.scheduler.ListJobs(scheduler_pb2.ListJobsRequest(), metadata=stack.md("curator"))
    assert "x\n" not in {job.job_id for job in listed.jobs}
    log_text = (stack.home / "scheduler.log").read_text()
    assert "record set aside" in log_text and "scheduler_load" in log_text
    await serving(stack)
