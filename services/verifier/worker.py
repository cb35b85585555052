"""Verifier workers: each claims one check at a time from the shared queue, builds its working copy, runs its script
in the sandbox and records the CheckCompleted. One worker per GPU (CUDA_VISIBLE_DEVICES pins it); a CPU-only
verifier runs one worker.

``python -m services.verifier.worker`` runs workers without the gRPC server: more verifier processes (other GPUs,
other hosts) sharing the one queue.
"""

import asyncio
import contextlib
import os
import signal
import socket
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from services.common import hostedgit, metrics
from services.common.config import ServerConfig, Settings
from services.common.eventlog import EventLog
from services.common.logs import bind_ids, configure_logging, get_logger
from services.common.sandbox import Box, Sandbox, SandboxConfig, isolation_available, planned_mounts
from services.verifier import checkrun, domain
from services.verifier.domain import CheckItem, RunOutcome, Verdict
from services.verifier.hostedrepo import CheckCheckout
from services.verifier.queue import CheckQueue, Claim
from services.verifier.slots import Slot, detect_slots

CHECK_BUCKETS = (1, 5, 10, 20, 30, 60, 90, 120, 180, 300, 600, 900, 1800, 3600)
TRANSIENT = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError)

CHECK_SECONDS = metrics.histogram(
    "kb_verifier_check_seconds", "Wall time of one check run, claim to completion.", ("check",), CHECK_BUCKETS
)
QUEUE_DEPTH = metrics.gauge("kb_verifier_queue_depth", "Checks waiting for a worker (queued or lease expired).")
CHECKS_TOTAL = metrics.counter("kb_verifier_checks_total", "Checks completed, by result.", ("result",))
FAILURES_TOTAL = metrics.counter("kb_verifier_failures_total", "Failed checks, by reason.", ("reason",))
RUNNING = metrics.gauge("kb_verifier_checks_running", "Checks running in this process now.")
NOT_ISOLATED = metrics.counter(
    "kb_verifier_sandbox_not_isolated_total", "Check runs without network/mount isolation (unshare unavailable)."
)

log = get_logger()


@dataclass(frozen=True)
class WorkerConfig:
    git_dir: Path
    sandbox: SandboxConfig
    slots: tuple[Slot, ...]
    lease_s: float = 60.0
    poll_s: float = 2.0
    max_attempts: int = 3
    python: str = sys.executable

    @classmethod
    def from_env(cls, settings: Settings, environ: Mapping[str, str] | None = None) -> "WorkerConfig":
        env = os.environ if environ is None else environ
        hidden = [str(settings.home), str(Path.home() / ".config" / "kernelboard")]
        isolate = env.get("KB_VERIFIER_ISOLATION", "auto")
        if isolate not in ("auto", "off"):
            raise ValueError(f"KB_VERIFIER_ISOLATION must be auto or off, not {isolate!r}")
        sandbox = SandboxConfig(
            root=Path(env.get("KB_VERIFIER_SANDBOX_DIR", str(settings.home / "verifier" / "sandboxes"))),
            isolate=isolate == "auto" and isolation_available(),
            hidden=tuple(hidden),
        )
        planned_mounts(sandbox)  # a layout checks cannot be confined in: refused here, before the verifier starts
        return cls(
            git_dir=hostedgit.location(settings.home),
            sandbox=sandbox,
            slots=tuple(detect_slots(env)),
            lease_s=float(env.get("KB_VERIFIER_LEASE_S", "60")),
            poll_s=float(env.get("KB_VERIFIER_POLL_S", "2")),
            python=env.get("KB_VERIFIER_PYTHON", sys.executable),
        )


class LeaseLost(Exception):
    pass


class Worker:
    def __init__(self, queue: CheckQueue, config: WorkerConfig, slot: Slot, name: str | None = None):
        self.queue = queue
        self.config = config
        self.slot = slot
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:{slot.name}"
        self.repo = CheckCheckout(config.git_dir)
        self.sandbox = Sandbox(config.sandbox)
        self._stopping = asyncio.Event()
        self._current: asyncio.Task | None = None

    async def run(self) -> None:
        """Claims and runs checks until stop()."""
        self._stopping.clear()
        while not self._stopping.is_set():
            try:
                worked = await self.run_once()
                QUEUE_DEPTH.set(await self.queue.depth())
            except TRANSIENT as err:
                log.warning("verifier worker: database unavailable", worker=self.name, error=repr(err))
                worked = False
            except Exception:  # a bug must not stop the worker: the check's lease runs out, it is retried, then failed
                log.exception("verifier worker: a check failed unexpectedly", worker=self.name)
                worked = False
            if not worked:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), self.config.poll_s)

    async def stop(self) -> None:
        self._stopping.set()
        if self._current is not None:
            self._current.cancel()

    async def run_once(self) -> bool:
        """Claims one check and runs it to completion; False when the queue had nothing to claim."""
        claim = await self.queue.claim(self.name)
        if claim is None:
            return False
        self._current = asyncio.current_task()
        try:
            await self._process(claim)
        except asyncio.CancelledError:
            if not self._stopping.is_set():
                raise
            # Shutting down: hand the check back at once rather than letting its lease run out.
            await asyncio.shield(self.queue.release(claim.item.check_id, self.name))
            log.info("check released on shutdown", check_id=claim.item.check_id, worker=self.name)
            return True
        finally:
            self._current = None
        return True

    async def _process(self, claim: Claim) -> None:
        item = claim.item
        with bind_ids(check_id=item.check_id, sha=item.sha, route=item.route or None, job_id=item.job_id or None):
            started = time.monotonic()
            log.info("check started", check=item.check_name, worker=self.name, attempt=claim.attempts)
            if claim.attempts > self.config.max_attempts:
                verdict = domain.abandoned(item, claim.attempts - 1, host=self.name)
            elif not item.route:
                verdict = domain.no_route(item, host=self.name)
            else:
                try:
                    verdict = await self._run_leased(item)
                except LeaseLost:
                    log.warning("check lost its lease (finished or claimed elsewhere); stopped", worker=self.name)
                    return
            event = await asyncio.shield(self.queue.complete(item.check_id, verdict))
            elapsed = time.monotonic() - started
            if event is None:
                log.warning("completion refused: the check was completed already", worker=self.name)
                return
            completed = verdict.completed
            result = "incomplete" if completed.incomplete else "passed" if completed.passed else "failed"
            CHECK_SECONDS.labels(item.check_name).observe(elapsed)
            CHECKS_TOTAL.labels(result).inc()
            if verdict.failure_reason:
                FAILURES_TOTAL.labels(verdict.failure_reason).inc()
            log.info(
                "check completed",
                result=result,
                reasons=list(verdict.completed.reasons),
                score=verdict.completed.score,
                runner=verdict.completed.runner,
                duration_s=round(elapsed, 2),
                position=event.global_position,
            )

    async def _run_leased(self, item: CheckItem) -> Verdict:
        """Runs the check while renewing its lease; LeaseLost when the lease is no longer ours."""
        run = asyncio.ensure_future(self._run_check(item))
        lost = False
        try:
            while not run.done():
                done, _ = await asyncio.wait({run}, timeout=self.config.lease_s / 3)
                if done:
                    break
                try:
                    if not await self.queue.heartbeat(item.check_id, self.name):
                        lost = True
                        run.cancel()
                except TRANSIENT as err:
                    log.warning("heartbeat failed; retrying", error=repr(err))
        finally:
            if not run.done():
                run.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await run
        if lost:
            raise LeaseLost()
        return run.result()

    async def _run_check(self, item: CheckItem) -> Verdict:
        """Runs the check's script; an incomplete run (a problem the judge could not judge) once more."""
        attempt = 0
        while True:
            attempt += 1
            RUNNING.inc()
            box = self.sandbox.make_box(item.check_id)
            try:
                outcome = await self._outcome(item, box)
            finally:
                RUNNING.dec()
                self.sandbox.remove_box(box)
            if outcome.output_tail:
                log.info("check output (tail)", output=outcome.output_tail[-2000:])
            verdict = domain.judge(item, outcome, host=self.name)
            verdict.completed.attempts = attempt
            if not verdict.retry:
                return verdict
            not_judged = [f"{s.id}: {s.not_judged}" for s in verdict.completed.subtasks if s.not_judged]
            log.warning("check incomplete; running it again", attempt=attempt, not_judged=not_judged)

    async def _outcome(self, item: CheckItem, box: Box) -> RunOutcome:
        prepared = await checkrun.prepare(self.repo, item, box, self.slot, self.config.python)
        if isinstance(prepared, RunOutcome):
            return prepared
        if not self.config.sandbox.isolate:
            NOT_ISOLATED.inc()
        finished = await self.sandbox.run(box, prepared.command, prepared.env, time_limit_s=item.time_limit_s)
        return checkrun.outcome(item, box, finished, prepared.timing_protocol)


def make_workers(queue: CheckQueue, config: WorkerConfig) -> list[Worker]:
    return [Worker(queue, config, slot) for slot in config.slots]


async def main() -> None:
    configure_logging("verifier-worker")
    settings = Settings.from_env()
    config = WorkerConfig.from_env(settings)
    event_log = await EventLog.connect(settings.database_url, **ServerConfig.from_env("verifier").pool_options())
    queue = CheckQueue(event_log, lease_s=config.lease_s)
    workers = make_workers(queue, config)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, lambda: [asyncio.ensure_future(w.stop()) for w in workers])
    log.info("verifier workers started", slots=[w.slot.name for w in workers], isolated=config.sandbox.isolate)
    try:
        await asyncio.gather(*(w.run() for w in workers))
    finally:
        await event_log.close()


if __name__ == "__main__":
    asyncio.run(main())
