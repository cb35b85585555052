"""The scheduler's jobs as pure functions and plain data, no I/O: a job's view folded from its event stream, the
events an observation of Slurm calls for, the route a submitted ref names, and the poll backoff. What a script asks
of Slurm is directives.py's; what sacct and squeue print, services/common/slurm.py's.
"""

from dataclasses import dataclass, field, replace

from kernelboard.v1 import events_pb2, scheduler_pb2

from contracts import names
from contracts.refusals import Refusal, clip
from services.common.slurm import QueueRecord, SacctRecord

# Slurm's terminal states, each handled: the job is over and its directory becomes a commit.
FINISHED_STATES = frozenset(
    {"COMPLETED", "FAILED", "TIMEOUT", "OUT_OF_MEMORY", "CANCELLED", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE"}
)
HELD_REASONS = frozenset({"JobHeldAdmin", "JobHeldUser"})
JOB_EVENT_TYPES = frozenset(
    {"JobSubmitted", "JobHeld", "JobReleased", "JobStateChanged", "JobFinished", "JobResultCommitted"}
)


# ---------------------------------------------------------------------------------------------------------------------
# Routes and refs


def route_of_ref(ref: str) -> str:
    """The route a ref belongs to: refs/heads/routes/<route> (or routes/<route>)."""
    try:
        parsed = names.ref(ref, short_forms=True)
    except Refusal:
        parsed = None
    if parsed is None or parsed.kind != "route":
        raise ValueError(f"ref {clip(ref)} is not a route ref (refs/heads/routes/<route>: {names.ROUTE.rule})")
    return parsed.route


# ---------------------------------------------------------------------------------------------------------------------
# The job state machine


@dataclass(frozen=True)
class JobView:
    job_id: str
    version: int = 0  # the job stream's version this view has folded
    route: str = ""
    ref: str = ""
    sha: str = ""
    script_path: str = ""
    owner: str = ""
    submitted_by: str = ""
    work_dir: str = ""
    resources: events_pb2.JobResources | None = None
    state: str = "PENDING"
    reason: str = ""
    held: bool = False
    released_by: str = ""
    finished: bool = False
    exit_code: int = 0
    signal: int = 0
    elapsed_s: float = 0.0
    cpu_seconds: float = 0.0
    result_ref: str = ""
    result_sha: str = ""
    result_error: str = ""  # why nothing was committed; as final as a result_sha
    excluded: tuple[str, ...] = field(default_factory=tuple)
    submitted_at: float = 0.0  # seconds since the epoch, for the held-age metric
    finished_at: float = 0.0  # also the result commit's date, so that a rebuilt commit has the same sha

    @property
    def settled(self) -> bool:
        """Ended, and its result committed or refused for good: nothing more will happen to it."""
        return self.finished and bool(self.result_sha or self.result_error)

    @property
    def needs_result(self) -> bool:
        return self.finished and not self.settled


def fold(view: JobView, event: events_pb2.Event) -> JobView:
    """The view after one event of its stream."""
    kind = event.WhichOneof("payload")
    payload = getattr(event, kind)
    view = replace(view, version=event.stream_version)
    if kind == "job_submitted":
        return replace(
            view,
            route=payload.route,
            ref=payload.ref,
            sha=payload.sha,
            script_path=payload.script_path,
            owner=payload.owner,
            submitted_by=payload.submitted_by,
            work_dir=payload.work_dir,
            resources=payload.resources,
            held=payload.held,
            state="PENDING",
            submitted_at=event.occurred_at.ToSeconds(),
        )
    if kind == "job_held":
        return replace(view, held=True, reason=payload.reason)
    if kind == "job_released":
        return replace(view, held=False, reason="", released_by=payload.released_by)
    if kind == "job_state_changed":
        return replace(view, state=payload.state, reason=payload.reason, held=payload.reason in HELD_REASONS)
    if kind == "job_finished":
        return replace(
            view,
            finished=True,
            held=False,
            state=payload.state,
            reason="",
            exit_code=payload.exit_code,
            signal=payload.signal,
            elapsed_s=payload.elapsed_s,
            cpu_seconds=payload.cpu_seconds,
            finished_at=event.occurred_at.ToSeconds(),
        )
    if kind == "job_result_committed":
        return replace(
            view,
            result_ref=payload.ref,
            result_sha=payload.sha,
            result_error=payload.not_committed,
            excluded=tuple(payload.excluded),
        )
    return view


def job_message(view: JobView) -> scheduler_pb2.Job:
    """The API's picture of a job."""
    return scheduler_pb2.Job(
        job_id=view.job_id,
        route=view.route,
        ref=view.ref,
        sha=view.sha,
        script_path=view.script_path,
        owner=view.owner,
        state=view.state,
        reason=view.reason,
        held=view.held,
        exit_code=view.exit_code,
        elapsed_s=view.elapsed_s,
        cpu_seconds=view.cpu_seconds,
        result_ref=view.result_ref,
        result_sha=view.result_sha,
        result_error=view.result_error,
        resources=view.resources,
        work_dir=view.work_dir,
        signal=view.signal,
        finished=view.finished,
        submitted_by=view.submitted_by,
        released_by=view.released_by,
        excluded=list(view.excluded),
        version=view.version,
    )


def fold_stream(job_id: str, events) -> JobView:
    view = JobView(job_id=job_id)
    for event in events:
        view = fold(view, event)
    return view


def observe(view: JobView, sacct: SacctRecord | None, queue: QueueRecord | None):
    """The event one successful poll calls for, or None.

    sacct is the truth for the end; squeue adds the pending reason (sacct shows a held job only as PENDING). A job in
    neither is unknown (accounting may lag just after sbatch), never done.
    """
    if view.finished:
        return None
    if sacct is not None and sacct.state in FINISHED_STATES:
        return events_pb2.JobFinished(
            job_id=view.job_id,
            state=sacct.state,
            exit_code=sacct.exit_code,
            signal=sacct.signal,
            elapsed_s=sacct.elapsed_s,
            cpu_seconds=sacct.cpu_seconds,
        )
    if queue is not None:
        state, reason = queue.state, queue.reason
    elif sacct is not None:
        state, reason = sacct.state, view.reason if sacct.state == view.state else ""
    else:
        return None
    if state in FINISHED_STATES:
        return None  # squeue says it ended but accounting has not caught up: wait for sacct's numbers
    if (state, reason) == (view.state, view.reason):
        return None
    return events_pb2.JobStateChanged(job_id=view.job_id, state=state, reason=reason)


# ---------------------------------------------------------------------------------------------------------------------
# Polling


def poll_delay(consecutive_failures: int, *, base_s: float = 1.0, max_s: float = 30.0) -> float:
    """Seconds to the next poll: base while polls succeed, doubling per failure up to max."""
    return min(max_s, base_s * (2 ** min(consecutive_failures, 16)))
