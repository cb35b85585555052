"""The scheduler's gRPC API: each request's fields checked (contracts.names), then JobService asked."""

from kernelboard.v1 import scheduler_pb2, scheduler_pb2_grpc

from contracts import names
from contracts.refusals import clip, invalid
from services.common import auth
from services.scheduler.domain import job_message
from services.scheduler.jobs import JobService

SCRIPT_PATH_MAX_CHARS = 1024


def submitted_ref(value: str) -> str:
    """A route ref (refs/heads/routes/<route>, or routes/<route>) in full, matched in full."""
    ref = names.ref(value, "ref", short_forms=True)
    if ref.kind != "route":
        raise invalid("bad_ref", f"ref {clip(value)}: jobs run on a route, refs/heads/routes/<route>")
    return ref.name


class SchedulerServicer(scheduler_pb2_grpc.SchedulerServicer):
    """Checks each request's fields (contracts.names), then asks JobService; a Refusal from either is turned into
    its status by the server's interceptor."""

    def __init__(self, jobs: JobService):
        self.jobs = jobs

    async def SubmitJob(self, request, context):
        ref, sha = submitted_ref(request.ref), names.object_id(request.sha, "sha")
        script_path = names.text(request.script_path, "script_path", SCRIPT_PATH_MAX_CHARS)
        return job_message(await self.jobs.submit(auth.current_principal(), ref, sha, script_path))

    async def ReleaseJob(self, request, context):
        return job_message(await self.jobs.release(auth.current_principal(), names.job_id(request.job_id)))

    async def CancelJob(self, request, context):
        return job_message(await self.jobs.cancel(auth.current_principal(), names.job_id(request.job_id)))

    async def GetJob(self, request, context):
        return job_message(self.jobs.get(names.job_id(request.job_id)))

    async def ListJobs(self, request, context):
        route = request.route and names.route(request.route)
        owner = request.owner and names.principal(request.owner, "owner")
        views = self.jobs.list_jobs(route=route, owner=owner, live_only=request.live_only)
        return scheduler_pb2.ListJobsReply(jobs=[job_message(view) for view in views])

    async def WatchJob(self, request, context):
        async for view in self.jobs.watch(names.job_id(request.job_id)):
            yield job_message(view)
