# One file past 500 lines: Jobs is the scheduler's one application service; its use cases share the folded views,
# the adapters and the rule that each append to a job's stream is decided again after a conflict. Its pure parts are
# domain.py, directives.py and slurm_records.py.
"""The scheduler's application layer: submit, release, cancel and follow jobs; every step an event on job:<id>.

It holds the jobs' views folded from the log and drives the adapters: the hosted repository (git), Slurm, and
ingest for result commits. Job streams have two writers (the scheduler, and ingest with the CommitIngested of a result
commit), so every append carries the stream's expected version and is decided again from the log after a conflict: a
job can never be reported finished twice, even by two schedulers or one restarted mid-poll.
"""

import asyncio
import contextlib
import hashlib
import shutil
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from kernelboard.v1 import events_pb2

from contracts import access, names, rules
from contracts.refusals import Refusal, invalid, not_found, precondition, unavailable
from services.common import hostedgit, metrics, routes, sandbox
from services.common.eventlog import ConcurrencyConflict, NewEvent
from services.common.hostedgit import GitError
from services.common.logs import bind_ids, get_logger
from services.common.setaside import SetAside
from services.common.slurm import Slurm, SlurmError
from services.scheduler import directives, domain
from services.scheduler.domain import JobView
from services.scheduler.jobdir import (
    HostedRepo,
    ResultRejected,
    ScriptError,
    hand_over,
    placement,
)

log = get_logger(component="scheduler")

JOBS = metrics.gauge("kb_scheduler_jobs", "Jobs known to the scheduler, by Slurm state.", ("state",))
HELD_JOBS = metrics.gauge("kb_scheduler_held_jobs", "Jobs waiting on hold for a maintainer to release them.")
OLDEST_HELD_AGE = metrics.gauge(
    "kb_scheduler_oldest_held_job_age_seconds", "How long the oldest held job has waited for release."
)
SBATCH_SECONDS = metrics.histogram("kb_scheduler_sbatch_seconds", "sbatch (and admin hold) latency.")
POLL_ERRORS = metrics.counter("kb_scheduler_poll_errors_total", "sacct/squeue polls that failed (jobs left unknown).")
SUBMIT_REFUSALS = metrics.counter(
    "kb_scheduler_submit_refusals_total",
    "Job submissions refused, by gRPC status (UNAVAILABLE: the Slurm controller did not answer).",
    ("code",),
)
RESULTS_NOT_COMMITTED = metrics.counter(
    "kb_scheduler_results_not_committed_total", "Finished jobs whose directory was refused for good (result limit)."
)
RESULT_ERRORS = metrics.counter(
    "kb_scheduler_result_commit_errors_total", "Attempts to commit a finished job's directory that failed."
)


def _slurm_refusal(err: SlurmError, what: str) -> Refusal:
    """Slurm turned a release or cancel down (the job's state there forbids it), or did not answer."""
    if err.refused:
        return precondition("slurm_refused", f"{what}: {err}")
    return unavailable("slurm_unavailable", f"{what}: {err}")


class ResultPusher(Protocol):
    async def push(self, ref: str, bundle: bytes) -> str:
        """Push the bundle for ref through ingest; returns the sha the ref now points at."""


@dataclass(frozen=True)
class SchedulerConfig:
    home: Path
    rules_path: Path | None = None  # used while the hosted repository has no tag `checks`
    max_result_file_bytes: int = 10 * 1024 * 1024
    max_result_bytes: int = 64 * 1000 * 1000
    poll_base_s: float = 1.0
    poll_max_s: float = 30.0
    job_user: str = "kb-job"  # who Slurm runs jobs as (sbatch --uid); never root; "": the scheduler's own uid
    jobs_root: Path | None = None  # default $KB_HOME/jobs; every folder above it must let the job user pass
    hidden: tuple[str, ...] = ()  # more host directories jobs must not see (Slurm's spool and state)
    python: sandbox.JobPython = field(default_factory=sandbox.job_python)  # the checks' Python, torch and triton

    @property
    def jobs_dir(self) -> Path:
        return self.jobs_root or self.home / "jobs"

    @property
    def repo_dir(self) -> Path:
        return hostedgit.location(self.home)

    @property
    def deployment(self) -> str:
        """Tags this deployment's Slurm job names, so that its orphans are told from other deployments' jobs."""
        return hashlib.sha256(str(self.home.resolve()).encode()).hexdigest()[:8]


class JobService:
    def __init__(self, event_log, slurm: Slurm, repo: HostedRepo, pusher: ResultPusher, config: SchedulerConfig):
        self.log = event_log
        self.slurm = slurm
        self.repo = repo
        self.pusher = pusher
        self.config = config
        self.jobs: dict[str, JobView] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._changed = asyncio.Condition()
        self._stopping = asyncio.Event()
        self._result_retry: dict[str, tuple[int, float]] = {}  # job id -> (failed attempts, next attempt, monotonic)
        OLDEST_HELD_AGE.set_function(self._oldest_held_age)

    # -- state ------------------------------------------------------------------------------------------------------

    async def load(self) -> int:
        """Fold every job stream from the log; returns how many jobs are still live (to be followed)."""
        jobs: dict[str, JobView] = {}
        # An event the fold cannot take (a job id that is not Slurm's, written by an older version or by hand) is set
        # aside, not fatal: the scheduler starts, and polls Slurm only with ids that are job ids.
        set_aside = SetAside("scheduler_load")
        async for event in self.log.read_all(types=set(domain.JOB_EVENT_TYPES)):
            job_id = event.stream.removeprefix("job:")
            try:
                names.job_id(job_id, "stream")
                jobs[job_id] = domain.fold(jobs.get(job_id) or JobView(job_id=job_id), event)
            except Exception as err:  # any one event: the others still fold
                set_aside.record(event.stream, err, event_id=event.event_id, position=event.global_position)
        set_aside.finish()
        self.jobs = jobs
        await self._changed_views()
        live = sum(not view.finished for view in jobs.values())
        log.info("jobs loaded from the log", jobs=len(jobs), live=live)
        return live

    def _lock(self, job_id: str) -> asyncio.Lock:
        return self._locks.setdefault(job_id, asyncio.Lock())

    async def _append(self, job_id: str, expected: int, payloads: list, actor: str) -> JobView:
        envelopes = await self.log.append(
            names.job_stream(job_id), expected, [NewEvent(payload=p, actor=actor) for p in payloads]
        )
        view = self.jobs.get(job_id) or JobView(job_id=job_id)
        for envelope in envelopes:
            view = domain.fold(view, envelope)
        self.jobs[job_id] = view
        await self._changed_views()
        return view

    async def _append_decided(self, job_id: str, decide, actor: str) -> JobView:
        """Append what decide(view) calls for at the view's version; on a conflict (ingest appends CommitIngested to
        job streams too) reload the stream and decide again, so that nothing is appended from a stale view."""
        for _ in range(5):
            view = self.jobs[job_id]
            payloads = decide(view)
            if not payloads:
                return view
            try:
                return await self._append(job_id, view.version, payloads, actor)
            except ConcurrencyConflict as err:
                log.info("job stream moved; deciding again from the log", job_id=job_id, detail=str(err))
                await self._reload(job_id)
        raise RuntimeError(f"job {job_id}: the stream kept moving under five appends in a row")

    async def _reload(self, job_id: str) -> JobView:
        view = domain.fold_stream(job_id, await self.log.read_stream(names.job_stream(job_id)))
        self.jobs[job_id] = view
        await self._changed_views()
        return view

    async def _changed_views(self) -> None:
        counts = Counter(view.state for view in self.jobs.values())
        for state in set(counts) | {"PENDING", "RUNNING", *domain.FINISHED_STATES}:
            JOBS.labels(state=state).set(counts.get(state, 0))
        HELD_JOBS.set(sum(view.held and not view.finished for view in self.jobs.values()))
        async with self._changed:
            self._changed.notify_all()

    def _oldest_held_age(self) -> float:
        held = [view.submitted_at for view in self.jobs.values() if view.held and not view.finished]
        return max(0.0, time.time() - min(held)) if held else 0.0

    def get(self, job_id: str) -> JobView:
        view = self.jobs.get(job_id)
        if view is None:
            raise not_found("unknown_job", f"no job {job_id!r}")
        return view

    def list_jobs(self, *, route: str = "", owner: str = "", live_only: bool = False) -> list[JobView]:
        views = [
            view
            for view in self.jobs.values()
            if (not route or view.route == route)
            and (not owner or view.owner == owner)
            and not (live_only and view.finished)
        ]
        return sorted(views, key=lambda view: int(view.job_id) if view.job_id.isdigit() else 0)

    async def watch(self, job_id: str) -> AsyncIterator[JobView]:
        """The job now and at each change, until it has ended and its result is committed."""
        view = self.get(job_id)
        while True:
            yield view
            if view.settled:
                return
            async with self._changed:
                await self._changed.wait_for(lambda seen=view.version: self.jobs[job_id].version != seen)
            view = self.jobs[job_id]

    # -- requests ---------------------------------------------------------------------------------------------------

    async def submit(self, principal, ref: str, sha: str, script_path: str) -> JobView:
        try:
            return await self._submit(principal, ref, sha, script_path)
        except Refusal as err:
            SUBMIT_REFUSALS.labels(code=err.code).inc()
            raise

    async def _submit(self, principal, ref: str, sha: str, script_path: str) -> JobView:
        try:
            route = domain.route_of_ref(ref)
        except ValueError as err:
            raise invalid("bad_ref", str(err)) from None
        if not names.OBJECT_ID.matches(sha):
            raise invalid("bad_sha", f"sha {sha!r}: give the full 40-character commit id")
        path = Path(script_path)
        if not script_path or path.is_absolute() or ".." in path.parts:
            raise invalid("bad_script_path", f"script path {script_path!r}: a relative path inside the commit")
        owner = await routes.route_owner(self.log, route)
        if owner is None:
            raise not_found("unknown_route", f"unknown route {route!r}: start it and push first")
        actor = access.Actor.of(principal)
        access.require(actor, access.Action.SUBMIT_JOB, access.Target(owner=owner, label=f"route {route!r}"))
        full_ref = names.route_ref(route)
        tip = await self.repo.resolve(full_ref)
        if tip is None or not await self.repo.is_ancestor(sha, tip):
            raise precondition(
                "commit_not_on_route",
                f"commit {sha[:12]} is not on {full_ref}: `kb push` it first",
            )
        try:
            script = await self.repo.read_script(sha, script_path)
        except ScriptError as err:
            raise invalid("not_a_script", str(err)) from None
        if script is None:
            raise not_found("no_script", f"no file {script_path!r} in commit {sha[:12]}")
        limits = await self._limits()
        try:
            plan = directives.plan_job(directives.script_text(script), limits)
        except directives.DirectiveError as err:
            raise invalid("bad_directives", f"{script_path}: {err}") from None
        resources = plan.resources
        held = access.held(actor)

        number, box = await self._new_work_dir()
        work_dir = box / "work"
        try:
            work_dir.mkdir(mode=0o700)
            await self.repo.export(sha, work_dir)
            # The submit directory is the script's own folder, as if its owner ran sbatch there in a clone.
            folder = str(Path(script_path).parent)
            chdir, placed = placement(work_dir, folder, plan.paths)
            if self.config.job_user:
                # Where the job's sandbox parks what it binds back (its Python) while it covers the rest.
                (box / ".visible").mkdir(mode=0o700)
                hand_over(box / ".visible", self.config.job_user)
                hand_over(work_dir, self.config.job_user)
            batch = box / "batch.sh"
            batch.write_text(
                sandbox.job_batch_script(
                    box=box,
                    workdir=str(chdir.relative_to(work_dir.resolve())),
                    command=[*plan.interpreter, f"{sandbox.INNER_ROOT}/work/{script_path}"],
                    hidden=self._hidden_from_jobs(),
                    network=limits[resources.partition].network,
                    cpu_seconds=resources.time_limit_s * max(resources.cpus, 1) + 60,
                    label=f"{self.config.deployment}-{number}",
                    python=self.config.python,
                )
            )
            batch.chmod(0o600)
            started = time.perf_counter()
            job_id = await self.slurm.submit(
                str(batch),
                str(chdir),
                job_name=f"kb-{self.config.deployment}-{number}",
                hold=held,
                user=self.config.job_user or None,
                options=[*plan.options, *(f"--{option}={path}" for option, path in placed.items())],
            )
            SBATCH_SECONDS.observe(time.perf_counter() - started)
        except directives.DirectiveError as err:
            shutil.rmtree(box, ignore_errors=True)
            raise invalid("bad_directives", f"{script_path}: {err}") from None
        except SlurmError as err:
            shutil.rmtree(box, ignore_errors=True)
            if err.refused:
                raise Refusal(err.code, "sbatch_refused", f"{script_path}: sbatch refused the job: {err}") from None
            raise unavailable("slurm_unavailable", f"the Slurm controller did not answer: {err}") from None
        except (GitError, OSError) as err:
            shutil.rmtree(box, ignore_errors=True)
            raise precondition("job_dir_failed", f"could not prepare the job directory: {err}") from None

        with bind_ids(job_id=job_id, route=route, sha=sha):
            submitted = events_pb2.JobSubmitted(
                job_id=job_id,
                route=route,
                ref=full_ref,
                sha=sha,
                script_path=script_path,
                owner=principal.owner,
                submitted_by=principal.name,
                resources=resources,
                held=held,
                work_dir=str(work_dir),
            )
            payloads = [submitted] + ([events_pb2.JobHeld(job_id=job_id, reason="JobHeldAdmin")] if held else [])
            try:
                async with self._lock(job_id):
                    view = await self._append(job_id, 0, payloads, principal.name)
            except BaseException as err:
                # Nothing half-written: a job the log does not know must not run.
                with contextlib.suppress(SlurmError):
                    await self.slurm.cancel(job_id)
                if isinstance(err, ConcurrencyConflict):
                    raise precondition(
                        "slurm_id_reused",
                        f"Slurm job id {job_id} is already in the event log: the cluster's state was reset while the "
                        "log was kept (cancelled the new job)",
                    ) from None
                raise
            log.info("job submitted", held=held, work_dir=str(work_dir), resources=str(resources).replace("\n", " "))
            return view

    async def release(self, principal, job_id: str) -> JobView:
        access.require(access.Actor.of(principal), access.Action.RELEASE_JOB)
        async with self._lock(job_id):
            view = self.get(job_id)
            if view.finished:
                raise precondition("job_ended", f"job {job_id} has already ended ({view.state})")
            if not view.held:
                raise precondition("not_held", f"job {job_id} is not held")
            try:
                await self.slurm.release(job_id)
            except SlurmError as err:
                raise _slurm_refusal(err, f"could not release job {job_id}") from None
            with bind_ids(job_id=job_id):
                log.info("job released", released_by=principal.name)
            released = events_pb2.JobReleased(job_id=job_id, released_by=principal.name)
            return await self._append_decided(job_id, lambda v: [released] if v.held else None, principal.name)

    async def cancel(self, principal, job_id: str) -> JobView:
        view = self.get(job_id)
        access.require(
            access.Actor.of(principal), access.Action.CANCEL_JOB, access.Target(owner=view.owner, label=f"job {job_id}")
        )
        if view.finished:
            raise precondition("job_ended", f"job {job_id} has already ended ({view.state})")
        try:
            await self.slurm.cancel(job_id)
        except SlurmError as err:
            raise _slurm_refusal(err, f"could not cancel job {job_id}") from None
        with bind_ids(job_id=job_id):
            log.info("job cancel requested", cancelled_by=principal.name)
        return view  # JobFinished(CANCELLED) follows from the next poll

    # -- following --------------------------------------------------------------------------------------------------

    async def poll_once(self) -> bool:
        """One batched sacct and one squeue for every live job; False when the poll failed (nothing concluded)."""
        live = [view.job_id for view in self.jobs.values() if not view.finished]
        if not live:
            return True
        try:
            accounting = await self.slurm.accounting(live)
            queue = await self.slurm.queue()
        except (SlurmError, ValueError) as err:
            POLL_ERRORS.inc()
            log.warning("poll failed: job states unknown until the next poll", error=str(err), live=len(live))
            return False
        for job_id in live:
            appended = []

            def decide(view, job_id=job_id, appended=appended):
                payload = domain.observe(view, accounting.get(job_id), queue.get(job_id))
                appended[:] = [payload] if payload else []
                return appended

            async with self._lock(job_id):
                await self._append_decided(job_id, decide, names.SCHEDULER)
            for payload in appended:
                with bind_ids(job_id=job_id):
                    log.info(type(payload).__name__, state=payload.state, reason=getattr(payload, "reason", ""))
        return True

    async def commit_results(self) -> None:
        """Commit each ended job's directory; a failure (ingest down) is retried with its own backoff."""
        for view in [view for view in self.jobs.values() if view.needs_result]:
            attempts, next_at = self._result_retry.get(view.job_id, (0, 0.0))
            if time.monotonic() < next_at:
                continue
            with bind_ids(job_id=view.job_id, sha=view.sha):
                try:
                    await self._commit_result(view.job_id)
                    self._result_retry.pop(view.job_id, None)
                except ResultRejected as err:  # the job's own doing: final, recorded, never retried
                    RESULTS_NOT_COMMITTED.inc()
                    await self._reject_result(view.job_id, str(err))
                    self._result_retry.pop(view.job_id, None)
                except (GitError, OSError, RuntimeError) as err:
                    RESULT_ERRORS.inc()
                    delay = domain.poll_delay(attempts, base_s=1.0, max_s=60.0)
                    self._result_retry[view.job_id] = (attempts + 1, time.monotonic() + delay)
                    log.warning("result commit failed; will retry", error=str(err), retry_in_s=delay)

    async def _commit_result(self, job_id: str) -> None:
        async with self._lock(job_id):
            view = self.jobs[job_id]
            if not view.needs_result:
                return
            ref = names.job_ref(job_id)
            message = (
                f"job {job_id}: {view.state} (exit {view.exit_code}, {view.elapsed_s:.0f} s, "
                f"{view.cpu_seconds:.0f} CPU-s)\n\n{view.script_path} on {view.ref} at {view.sha}\n"
            )
            result = await self.repo.commit_result(
                Path(view.work_dir),
                view.sha,
                job_id,
                message,
                max_file_bytes=self.config.max_result_file_bytes,
                max_result_bytes=self.config.max_result_bytes,
                date=int(view.finished_at),
            )
            # A push that landed before a restart built this same commit (same tree, same date): don't push twice.
            if await self.repo.resolve(ref) != result.sha:
                pushed = await self.pusher.push(ref, result.bundle)
                if pushed != result.sha:
                    raise RuntimeError(f"ingest stored {pushed} for {ref}, expected {result.sha}")
            committed = events_pb2.JobResultCommitted(
                job_id=job_id,
                ref=ref,
                sha=result.sha,
                parent=view.sha,
                files=result.files,
                bytes=result.bytes,
                excluded=result.excluded,
            )
            await self._append_decided(job_id, lambda v: [committed] if v.needs_result else None, names.SCHEDULER)
            log.info("job result committed", ref=ref, result_sha=result.sha, excluded=len(result.excluded))

    async def _reject_result(self, job_id: str, reason: str) -> None:
        async with self._lock(job_id):
            view = self.jobs[job_id]
            rejected = events_pb2.JobResultCommitted(job_id=job_id, parent=view.sha, not_committed=reason)
            await self._append_decided(job_id, lambda v: [rejected] if v.needs_result else None, names.SCHEDULER)
            log.warning("job result not committed", reason=reason)

    async def cancel_orphans(self) -> list[str]:
        """Cancel this deployment's Slurm jobs the log does not know (sbatch ran, then the scheduler died before
        the append): a job nobody follows must not run."""
        try:
            queue = await self.slurm.queue()
        except SlurmError as err:
            log.warning("could not look for orphaned jobs", error=str(err))
            return []
        prefix = f"kb-{self.config.deployment}-"
        orphans = [r.job_id for r in queue.values() if r.name.startswith(prefix) and r.job_id not in self.jobs]
        for job_id in orphans:
            with contextlib.suppress(SlurmError):
                await self.slurm.cancel(job_id)
            log.warning("cancelled a job the log does not know", job_id=job_id)
        return orphans

    async def follow(self) -> None:
        """Poll with backoff and commit results until stop(); a failed poll only delays."""
        failures = 0
        while not self._stopping.is_set():
            try:
                failures = 0 if await self.poll_once() else failures + 1
                await self.commit_results()
            except Exception:  # the follower must outlive any one bad round (a database blip, a bug in one job)
                failures += 1
                POLL_ERRORS.inc()
                log.exception("following jobs failed this round; retrying")
            delay = domain.poll_delay(failures, base_s=self.config.poll_base_s, max_s=self.config.poll_max_s)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), delay)

    def stop(self) -> None:
        self._stopping.set()

    # -- helpers ----------------------------------------------------------------------------------------------------

    async def _limits(self) -> dict[str, directives.PartitionLimits]:
        """The partitions of the rules that judge (scienceslack.json at the tag checks), else the configured file."""
        text = None
        checks = await self.repo.resolve(names.CHECKS_TAG)
        if checks is not None:
            text = await self.repo.read_file(checks, rules.RULES_FILE)
        if text is None and self.config.rules_path is not None:
            text = self.config.rules_path.read_bytes()
        if text is None:
            raise precondition("no_rules", "no rules: the hosted repository has no tag checks yet")
        try:
            return directives.partition_limits(rules.parse(text))
        except rules.RulesError as err:
            raise precondition("bad_rules", f"scienceslack.json: {err}") from None

    def _hidden_from_jobs(self) -> list[str]:
        """What a job must not see even read-only: KB_HOME (tokens, the hosted repository), every job directory but
        its own, and Slurm's state (other jobs' scripts)."""
        return list(dict.fromkeys([str(self.config.home), str(self.config.jobs_dir), *self.config.hidden]))

    async def _new_work_dir(self) -> tuple[int, Path]:
        """A fresh job directory: root's, mode 0711 (the job user may pass through to its work/, nothing more)."""
        self.config.jobs_dir.mkdir(mode=0o711, parents=True, exist_ok=True)
        while True:
            number = await self.log.pool.fetchval("SELECT nextval('scheduler_job_dir_seq')")
            work_dir = self.config.jobs_dir / str(number)
            try:
                work_dir.mkdir(mode=0o711)
                work_dir.chmod(0o711)  # whatever the umask
                return number, work_dir
            except FileExistsError:
                continue  # left by an earlier database on the same KB_HOME
