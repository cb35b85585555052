"""The verifier dispatches, Slurm runs: each queued check that names a partition becomes one Slurm job there
(``KB_VERIFIER_DISPATCH=slurm``; docs/ARCHITECTURE.md, "Runners").

A cycle, every ``poll_s``: take over the checks of dispatchers that are gone; follow every dispatched check with one
sacct call; then fill each partition's free runners with the next queued checks (runnerqueue.py: fair between
owners). One check's run: its box (working copy, run.json) is prepared here, exactly as a worker prepares it, on a
folder the runner nodes share; sbatch runs ``python -m services.verifier.runner BOX`` on the node Slurm chose (the
same sandbox as a worker's); when sacct says the job ended, the box's finished.json and metrics file are judged here
and CheckCompleted is appended once, with Slurm's accounting as its cost and the node as its verifier_host.

Faults, each ending in a clear state: a job Slurm refuses fails the check at once, saying Slurm's answer; a job not
started within ``start_timeout_s``, a runner node that failed or a job cancelled under it, a job that ended without
a result: the check goes back to the queue and runs again elsewhere, up to ``max_attempts``, then fails saying how the
last attempt ended; an unreachable Slurm (sbatch, sacct) changes nothing until it answers again, the checks keep
their state and the error is counted. A job the verifier lost track of (it died between sbatch and recording the id)
is found again by its name (contracts.runners.check_job_name: check and attempt), never submitted twice.
"""

import asyncio
import contextlib
import json
import math
import os
import shlex
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from contracts import runners as runner_names
from services.common import metrics
from services.common.config import Settings
from services.common.logs import bind_ids, get_logger
from services.common.sandbox import INNER_ROOT, Box, Finished, Sandbox
from services.common.slurm import NodeRecord, SacctRecord, Slurm, SlurmError
from services.verifier import checkrun, domain
from services.verifier.domain import RunOutcome, Verdict
from services.verifier.hostedrepo import CheckCheckout
from services.verifier.queue import CheckQueue, Claim
from services.verifier.runner import FINISHED_FILE, write_spec
from services.verifier.runnerqueue import Dispatched, RunnerQueue
from services.verifier.slots import CODE_ROOT, Slot
from services.verifier.worker import CHECK_SECONDS, CHECKS_TOTAL, FAILURES_TOTAL, TRANSIENT, WorkerConfig

log = get_logger()

STAGE_BUCKETS = (0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120, 300, 600)
RUNNERS = metrics.gauge("kb_verifier_runners", "Runner nodes of a partition, by state (up: can take a check).",
                        ("partition", "state"))  # fmt: skip
SLURM_QUEUE_DEPTH = metrics.gauge("kb_verifier_slurm_queue_depth", "Checks waiting for a runner.", ("partition",))
SLURM_QUEUE_OLDEST = metrics.gauge(
    "kb_verifier_slurm_queue_oldest_seconds", "Age of the oldest check waiting for a runner (0: none).", ("partition",)
)
DISPATCHED = metrics.gauge(
    "kb_verifier_slurm_checks_dispatched", "Checks on Slurm now (pending or running there).", ("partition",)
)
DISPATCH_SECONDS = metrics.histogram(
    "kb_verifier_dispatch_seconds",
    "Overhead of running a check on Slurm, by stage: dispatched_to_running (claim and sbatch to the runner starting "
    "it), finished_to_completed (the runner done to CheckCompleted appended).",
    ("stage",),
    STAGE_BUCKETS,
)
SLURM_ERRORS = metrics.counter(
    "kb_verifier_slurm_errors_total", "Slurm commands that failed: refused (Slurm answered no) or unreachable.",
    ("command", "kind"),
)  # fmt: skip
RERUNS = metrics.counter("kb_verifier_check_reruns_total", "Checks sent back to the queue to run again, by why.",
                         ("why",))  # fmt: skip

# Slurm states of a job that may still run; every other state is final (sacct's).
ALIVE = frozenset({"PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "REQUEUED", "RESIZING", "SUSPENDED"})
JUDGED = frozenset({"COMPLETED", "FAILED", "TIMEOUT", "OUT_OF_MEMORY"})  # the runner ran; its box says the rest


@dataclass(frozen=True)
class DispatchConfig:
    slurm_conf: str | None
    poll_s: float = 1.0
    start_timeout_s: float = 300.0  # a job Slurm has not started by then is cancelled and its check run again
    lost_after_s: float = 30.0  # a dispatched check Slurm's accounting does not know this long: its job is lost
    slots: int = 0  # checks per partition on Slurm at once; 0: one per runner node up
    time_margin_s: int = 120  # Slurm's --time over the check's own limit (the sandbox stops the script first)

    @classmethod
    def from_env(cls, settings: Settings, environ: Mapping[str, str] | None = None) -> "DispatchConfig":
        env = os.environ if environ is None else environ
        if not settings.slurm_conf and not Path("/etc/slurm/slurm.conf").is_file():
            raise ValueError("KB_VERIFIER_DISPATCH=slurm needs the cluster's slurm.conf: set SLURM_CONF")
        return cls(
            slurm_conf=settings.slurm_conf,
            poll_s=float(env.get("KB_VERIFIER_SLURM_POLL_S", "1")),
            start_timeout_s=float(env.get("KB_VERIFIER_START_TIMEOUT_S", "300")),
            slots=int(env.get("KB_VERIFIER_SLURM_SLOTS", "0")),
        )


def dispatching(environ: Mapping[str, str] | None = None) -> bool:
    """KB_VERIFIER_DISPATCH: local (the default: every check on this host) or slurm (checks naming a partition
    become Slurm jobs there)."""
    mode = (os.environ if environ is None else environ).get("KB_VERIFIER_DISPATCH", "local")
    if mode not in ("local", "slurm"):
        raise ValueError(f"KB_VERIFIER_DISPATCH must be local or slurm, not {mode!r}")
    return mode == "slurm"


def runner_slot(slot: Slot) -> Slot:
    """A worker's slot without its pinned GPU: on a runner the GPU is the one Slurm gives the job."""
    return Slot("slurm", slot.device, slot.shapes, {k: v for k, v in slot.env.items() if k != "CUDA_VISIBLE_DEVICES"})


def runner_slots(nodes: list[NodeRecord], device: str) -> int:
    """Checks a partition runs at once: one per GPU of each GPU runner up, one per CPU runner up."""
    return sum(max(1, node.gpus) if device == "cuda" else 1 for node in nodes if node.up)


def job_options(claim: Claim, box: Path, device: str, time_margin_s: int, avoid: list[str]) -> list[str]:
    """sbatch's options for one attempt: the partition under the runners' account, the check's time limit and some,
    its output in the box, the nodes earlier attempts were lost on left out; a GPU runner's GRES, or a whole CPU
    runner."""
    item = claim.item
    options = [
        f"--partition={item.partition}",
        f"--account={runner_names.RUNNERS_ACCOUNT}",
        f"--time={math.ceil((item.time_limit_s + time_margin_s) / 60)}",
        f"--output={box / 'slurm.out'}",
    ]
    if avoid:
        options.append(f"--exclude={','.join(avoid)}")
    if device == "cuda" and item.gres:
        return [*options, f"--gres={item.gres}"]
    return [*options, "--exclusive", "--mem=0"]


def job_script(box: Path, python: str) -> str:
    q = shlex.quote
    return f"""#!/bin/bash
# kernelboard check job: written by the verifier (services/verifier/dispatch.py); runs the check prepared in its box
# in the verifier's sandbox on this runner node (services/verifier/runner.py).
cd {q(str(CODE_ROOT))}
export PYTHONPATH={q(f"{CODE_ROOT}:{CODE_ROOT / 'protos'}")}
exec {q(python)} -m services.verifier.runner {q(str(box))}
"""


def read_finished(box: Path) -> tuple[Finished, dict] | None:
    """The runner's finished.json (its Finished and the whole record), or None when absent or not the runner's."""
    try:
        record = json.loads((box / FINISHED_FILE).read_text())
        finished = Finished(
            exit_code=None if record["exit_code"] is None else int(record["exit_code"]),
            timed_out=bool(record["timed_out"]),
            duration_s=float(record["duration_s"]),
            output_tail=str(record["output_tail"]),
        )
        float(record["started_at"]), float(record["finished_at"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return finished, record


def _age_s(moment: datetime | None) -> float:
    return 0.0 if moment is None else (datetime.now(UTC) - moment).total_seconds()


def _tail(path: Path) -> str:
    with contextlib.suppress(OSError):
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
        return lines[-1][:300] if lines else ""
    return ""


class Dispatcher:
    def __init__(self, queue: CheckQueue, worker: WorkerConfig, config: DispatchConfig, *, name: str | None = None):
        self.queue = queue
        self.runners = RunnerQueue(queue)
        self.slurm = Slurm(config.slurm_conf)
        self.config = config
        self.worker = worker
        self.slot = runner_slot(worker.slots[0])
        self.repo = CheckCheckout(worker.git_dir)
        self.sandbox = Sandbox(worker.sandbox)
        self.host = socket.gethostname()
        self.name = name or f"slurm:{self.host}:{os.getpid()}"
        self._stopping = asyncio.Event()
        self._partitions: set[str] = set()  # every partition reported, so that one emptied reads 0

    async def run(self) -> None:
        """Cycles until stop(). Jobs on Slurm keep running when it stops; the next dispatcher adopts them."""
        self._stopping.clear()
        while not self._stopping.is_set():
            try:
                await self.cycle()
            except TRANSIENT as err:
                log.warning("dispatcher: database unavailable", dispatcher=self.name, error=repr(err))
            except Exception:  # a bug must not stop dispatching: the checks keep their state and their jobs
                log.exception("dispatcher: a cycle failed unexpectedly", dispatcher=self.name)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.config.poll_s)

    async def stop(self) -> None:
        self._stopping.set()

    async def cycle(self) -> None:
        adopted = await self.runners.adopt(self.name, self._gone(await self.runners.dispatchers()))
        if adopted:
            log.info("dispatcher adopted the checks of a dispatcher that is gone", checks=adopted)
        await self.runners.renew(self.name)
        await self._follow(await self.runners.in_flight(self.name))
        # The rules' runners' partitions too, idle or not: their runners' states are reported either way.
        approved = await self.queue.current_rules()
        wanted = set(await self.runners.partitions()) | (set(approved.rules.runner_partitions) if approved else set())
        for partition in sorted(wanted):
            if not self._stopping.is_set():
                await self._fill(partition)
        await self._report()

    def _gone(self, dispatchers: list[str]) -> list[str]:
        """This host's dispatchers whose process is no more (another host's are adopted when their lease ends)."""
        gone = []
        for name in dispatchers:
            kind, _, rest = name.partition(":")
            host, _, pid = rest.rpartition(":")
            if kind != "slurm" or host != self.host or not pid.isdigit() or name == self.name:
                continue
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                gone.append(name)
            except PermissionError:
                pass
        return gone

    # --- following ---

    async def _follow(self, flights: list[Dispatched]) -> None:
        ids = [f.slurm_job_id for f in flights if f.slurm_job_id]
        records: dict[str, SacctRecord] | None = {}
        if ids:
            try:
                records = await self.slurm.accounting(ids)
            except (SlurmError, ValueError) as err:
                self._slurm_error("sacct", err)
                records = None
        for flight in flights:
            item = flight.claim.item
            with bind_ids(check_id=item.check_id, sha=item.sha, route=item.route or None):
                if not flight.slurm_job_id:
                    await self._find_lost(flight)
                elif records is not None:
                    await self._observe(flight, records.get(flight.slurm_job_id))

    async def _find_lost(self, flight: Dispatched) -> None:
        """A check dispatched without a recorded job (its dispatcher died between sbatch and the record): its job
        by name, or back to the queue once Slurm has had time to show one."""
        name = runner_names.check_job_name(flight.claim.item.check_id, flight.claim.attempts)
        try:
            found = await self.slurm.jobs_named([name])
        except (SlurmError, ValueError) as err:
            self._slurm_error("sacct", err)
            return
        if found:
            job_id = max(found, key=int)
            await self.runners.record_job(flight.claim.item.check_id, self.name, job_id)
            log.info("dispatcher found a check's job again by its name", slurm_job_id=job_id, job_name=name)
        elif _age_s(flight.dispatched_at) > self.config.lost_after_s:
            await self.runners.requeue(flight.claim.item.check_id, self.name, count_attempt=False)
            RERUNS.labels("never_submitted").inc()
            log.warning("a dispatched check's job never reached Slurm; queued again", job_name=name)

    async def _observe(self, flight: Dispatched, record: SacctRecord | None) -> None:
        age = _age_s(flight.dispatched_at)
        if record is None:
            if age > self.config.lost_after_s:
                await self._run_again_or_fail(flight, f"job {flight.slurm_job_id} unknown to Slurm's accounting")
            return
        if record.state == "PENDING":
            if age > self.config.start_timeout_s:
                reason = await self._pending_reason(flight.slurm_job_id)
                with contextlib.suppress(SlurmError):
                    await self.slurm.cancel(flight.slurm_job_id)
                how = f"not started by Slurm within {self.config.start_timeout_s:.0f} s ({reason or 'no reason given'})"
                await self._run_again_or_fail(flight, how)
            return
        if record.state in ALIVE:
            if record.node and record.node != flight.runner_node:
                await self.runners.mark_running(flight.claim.item.check_id, self.name, record.node)
                log.info("check running on a runner", node=record.node, slurm_job_id=flight.slurm_job_id)
            return
        if record.state in JUDGED:
            await self._collect(flight, record)
        else:
            await self._run_again_or_fail(flight, f"job {flight.slurm_job_id} ended {record.state} on "
                                                  f"{record.node or 'no node'}")  # fmt: skip

    async def _pending_reason(self, job_id: str) -> str:
        try:
            queued = (await self.slurm.queue()).get(job_id)
        except (SlurmError, ValueError):
            return ""
        return queued.reason if queued else ""

    async def _collect(self, flight: Dispatched, record: SacctRecord) -> None:
        claim, box = flight.claim, self._box(flight.claim)
        read = read_finished(box.path)
        if read is None and record.state not in ("TIMEOUT", "OUT_OF_MEMORY"):
            why = _tail(box.path / "slurm.out") or f"exit status {record.exit_code}"
            await self._run_again_or_fail(flight, f"job {flight.slurm_job_id} ended {record.state} on "
                                                  f"{record.node} without a result: {why}")  # fmt: skip
            return
        if read is None:  # Slurm stopped the runner itself: over its --time, or over the node's memory
            killed = Finished(None if record.state == "TIMEOUT" else -9, record.state == "TIMEOUT", record.elapsed_s,
                              _tail(box.path / "slurm.out"))  # fmt: skip
            read = (killed, {})
        finished, times = read
        outcome = checkrun.outcome(claim.item, box, finished, self._spec(box).get("timing_protocol", ""))
        verdict = domain.judge(claim.item, outcome, host=record.node)
        verdict.completed.attempts = claim.attempts
        # Slurm's accounting is the cost: GPU-seconds of the allocation, or a CPU runner's node-seconds.
        verdict.completed.cost = record.elapsed_s * max(record.gpus, 1)
        if verdict.retry:
            await self.runners.requeue(claim.item.check_id, self.name)
            RERUNS.labels("incomplete").inc()
            log.warning("check incomplete; running it again", attempt=claim.attempts)
        else:
            await self._complete(claim, verdict, record.elapsed_s, times, flight)
        self.sandbox.remove_box(box)

    async def _run_again_or_fail(self, flight: Dispatched, how: str) -> None:
        claim = flight.claim
        if claim.attempts >= self.worker.max_attempts:
            verdict = domain.runner_lost(claim.item, claim.attempts, how, host=flight.runner_node)
            await self._complete(claim, verdict, 0.0, {}, flight)
        else:
            await self.runners.requeue(claim.item.check_id, self.name, lost_on=flight.runner_node)
            RERUNS.labels("runner_lost").inc()
            log.warning("check's job ended without a result; queued to run again", how=how, attempt=claim.attempts)
        self.sandbox.remove_box(self._box(claim))

    async def _complete(
        self, claim: Claim, verdict: Verdict, elapsed_s: float, times: dict, flight: Dispatched | None
    ) -> None:
        event = await self.queue.complete(claim.item.check_id, verdict)
        if event is None:
            log.warning("completion refused: the check was completed already", dispatcher=self.name)
            return
        completed = verdict.completed
        result = "incomplete" if completed.incomplete else "passed" if completed.passed else "failed"
        CHECKS_TOTAL.labels(result).inc()
        if verdict.failure_reason:
            FAILURES_TOTAL.labels(verdict.failure_reason).inc()
        if elapsed_s:
            CHECK_SECONDS.labels(claim.item.check_name).observe(elapsed_s)
        if times and flight is not None:
            DISPATCH_SECONDS.labels("dispatched_to_running").observe(
                max(0.0, times["started_at"] - flight.dispatched_at.timestamp())
            )
            DISPATCH_SECONDS.labels("finished_to_completed").observe(max(0.0, time.time() - times["finished_at"]))
        log.info(
            "check completed",
            result=result,
            reasons=list(completed.reasons),
            score=completed.score,
            node=completed.verifier_host,
            attempts=completed.attempts,
            cost=completed.cost,
            position=event.global_position,
        )

    # --- dispatching ---

    async def _fill(self, partition: str) -> None:
        try:
            nodes = await self.slurm.nodes(partition)
        except (SlurmError, ValueError) as err:
            self._slurm_error("sinfo", err)
            return
        up = sum(1 for node in nodes if node.up)
        RUNNERS.labels(partition, "up").set(up)
        RUNNERS.labels(partition, "down").set(len(nodes) - up)
        busy = sum(1 for f in await self.runners.in_flight(self.name) if f.claim.item.partition == partition)
        names = {node.name for node in nodes}
        # A partition Slurm shows no node of still gets one job at a time: sbatch's answer (an unknown partition)
        # then fails each check saying so, rather than checks waiting for runners that do not exist.
        capacity = self.config.slots or (runner_slots(nodes, self.slot.device) if nodes else 1)
        for _ in range(max(0, capacity - busy)):
            claim = await self.runners.claim_next(self.name, partition)
            if claim is None or not await self._start(claim, names):
                return

    async def _start(self, claim: Claim, nodes: set[str]) -> bool:
        """Prepares and submits one attempt; False when Slurm could not be reached (stop filling for now)."""
        item = claim.item
        with bind_ids(check_id=item.check_id, sha=item.sha, route=item.route or None):
            if claim.attempts > self.worker.max_attempts:
                await self._complete(claim, domain.abandoned(item, claim.attempts - 1, host=""), 0.0, {}, None)
                return True
            if not item.route:
                await self._complete(claim, domain.no_route(item, host=""), 0.0, {}, None)
                return True
            box = self.sandbox.make_box(self._box_name(claim))
            prepared = await checkrun.prepare(self.repo, item, box, self.slot, self.worker.python)
            if isinstance(prepared, RunOutcome):
                verdict = domain.judge(item, prepared, host="")
                verdict.completed.attempts = claim.attempts
                await self._complete(claim, verdict, 0.0, {}, None)
                self.sandbox.remove_box(box)
                return True
            write_spec(box, command=prepared.command, env=prepared.env, time_limit_s=item.time_limit_s,
                       sandbox=self.worker.sandbox, device=self.slot.device,
                       timing_protocol=prepared.timing_protocol)  # fmt: skip
            # Elsewhere than where earlier attempts were lost, while another node remains.
            avoid = sorted(set(await self.runners.lost_on(item.check_id)) & nodes)
            avoid = avoid if len(avoid) < len(nodes) else []
            script = box.path / "job.sh"
            script.write_text(job_script(box.path, self.worker.python))
            try:
                job_id = await self.slurm.submit(
                    str(script),
                    str(box.path),
                    job_name=runner_names.check_job_name(item.check_id, claim.attempts),
                    hold=False,
                    options=job_options(claim, box.path, self.slot.device, self.config.time_margin_s, avoid),
                )
            except SlurmError as err:
                self._slurm_error("sbatch", err)
                self.sandbox.remove_box(box)
                if err.refused:
                    await self._complete(claim, domain.slurm_refused(item, claim.attempts, str(err)), 0.0, {}, None)
                    return True
                await self.runners.requeue(item.check_id, self.name, count_attempt=False)
                return False
            await self.runners.record_job(item.check_id, self.name, job_id)
            log.info("check dispatched", slurm_job_id=job_id, partition=item.partition, attempt=claim.attempts)
            return True

    # --- the box and the metrics ---

    @staticmethod
    def _box_name(claim: Claim) -> str:
        return f"{claim.item.check_id}.{claim.attempts}"  # an attempt's own box: a late one never writes the next's

    def _box(self, claim: Claim) -> Box:
        path = self.worker.sandbox.root / self._box_name(claim)
        return Box(path, INNER_ROOT if self.worker.sandbox.isolate else str(path))

    @staticmethod
    def _spec(box: Box) -> dict:
        with contextlib.suppress(OSError, ValueError):
            return json.loads((box.path / "run.json").read_text())
        return {}

    def _slurm_error(self, command: str, err: Exception) -> None:
        kind = "refused" if isinstance(err, SlurmError) and err.refused else "unreachable"
        SLURM_ERRORS.labels(command, kind).inc()
        log.warning("Slurm command failed", command=command, kind=kind, error=str(err), dispatcher=self.name)

    async def _report(self) -> None:
        waiting = await self.runners.waiting()
        flights = await self.runners.in_flight(self.name)
        self._partitions |= set(waiting) | {f.claim.item.partition for f in flights}
        for partition in self._partitions:
            depth, oldest = waiting.get(partition, (0, 0.0))
            SLURM_QUEUE_DEPTH.labels(partition).set(depth)
            SLURM_QUEUE_OLDEST.labels(partition).set(oldest)
            DISPATCHED.labels(partition).set(sum(1 for f in flights if f.claim.item.partition == partition))
