"""The judge's handle on the candidate process: started confined (confine.py) as ``python -m
services.verifier.harness.candidate``, let go only after every reference is timed, asked one order at a time with a
deadline on every answer, its channel's own cost measured before any route code is imported (``calibrate``), and
killed when its problem is judged. ``Candidates`` starts one per check (again after one died); ``stage_route`` copies
the route's files where the job user can read them."""

import contextlib
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import torch

from contracts.metrics import MAX_PEAK_BYTES
from services.verifier.harness.channel import Channel, ChannelClosed, ChannelTimeout, OutputTail, ProtocolError
from services.verifier.harness.confine import Caps, Confinement, interpreter_paths
from services.verifier.harness.context import CandidateDied, Context, CouldNotRun, problem_time_limit_s
from services.verifier.harness.device import Timing
from services.verifier.harness.gate import GatePage
from services.verifier.harness.gated import WAIT_YIELD_EVERY
from services.verifier.harness.shared_memory import Region, flat_places, send_region

CALIBRATION_PINGS = 20
GPU_MEMORY_FRACTION = "0.55"  # of the GPU for the candidate's torch allocator (full shapes peak near 60 GB)
CALIBRATION_BYTES = {"gpu": 64 << 20, "cpu": 4 << 20}  # the output region holds at least this
CODE_ROOT = Path(__file__).resolve().parents[3]
PEAK_ANSWER_S = 10.0  # the candidate's report of its peak memory, asked after each problem


@dataclass(frozen=True)
class CandidateSetup:
    route_dir: Path  # the staged copy the candidate reads
    problems_root: Path  # where `kernels.problems` is imported from
    hidden: tuple[str, ...]  # the judge's files: the metrics file's directory, KB_HOME, tokens
    caps: Caps
    profile: str  # gpu | cpu
    problem_ids: tuple[str, ...] = ()  # the problems the candidate will be asked to run


def ran_into(caps: list[str]) -> str:
    """The caps a candidate ran into, as the end of a failure reason ("" for none)."""
    return f"; it ran into {' and '.join(caps)}" if caps else ""


class CandidateProcess:
    """The confined process route code runs in, and the judge's only line to it. Started (``__init__``) while the
    judge may still be timing its references, it loads its interpreter and torch and waits; ``go`` lets it start CUDA
    and, from then on, run route code: the judge calls it only once every reference of the check is timed."""

    def __init__(self, ctx: Context, setup: CandidateSetup, workdir: Path, memory_rlimit: bool = True):
        self.ctx = ctx
        self.setup = setup
        self.spawned_at = time.monotonic()
        self.confinement = Confinement.prepare(
            setup.caps,
            name="kb-candidate",
            hidden=setup.hidden,
            visible=[str(CODE_ROOT), str(setup.problems_root), str(setup.route_dir), *interpreter_paths()],
            gpu=ctx.device.type == "cuda",
            gpu_pci=ctx.kit.pci_address,
            memory_rlimit=memory_rlimit,
        )
        to_candidate, from_judge = os.pipe()
        from_candidate, to_judge = os.pipe()
        self.outputs: Region | None = None  # made by go(), when the references have said how large an output is
        self.gate = GatePage.create()  # version 2's gate for every timed call (gate.py)
        self.seq = 0  # the last timed call's sequence number at the gate
        # Descriptors of the memory the judge makes for outputs and GPU timed calls' inputs (shared_memory.py).
        self.handover, handover_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "PYTHONPATH": str(CODE_ROOT),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1",
            "KB_CHANNEL_FDS": f"{to_candidate},{to_judge}",
            "KB_HANDOVER_FD": str(handover_end.fileno()),
            "KB_DEVICE": ctx.device.type,
            "KB_SHAPE": ctx.shape,
            "KB_ROUTE_DIR": str(setup.route_dir),
            "KB_PROBLEMS_ROOT": str(setup.problems_root),
            **self.confinement.scratch_env(),
        }
        # PYTHONHASHSEED: a run can fix the candidate's layout along with its own (bench/harness/layout_gpu.sh).
        for name in ("TRITON_INTERPRET", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "PYTHONHASHSEED"):
            if name in os.environ:
                env[name] = os.environ[name]
        if self.confinement.one_gpu:  # the only GPU in its sandbox is CUDA's device 0 there
            env.pop("CUDA_VISIBLE_DEVICES", None)
        if ctx.device.type == "cuda":  # the judge keeps the rest: a candidate that takes it all fails, not the check
            env["KB_GPU_MEMORY_FRACTION"] = os.environ.get("KB_GPU_MEMORY_FRACTION", GPU_MEMORY_FRACTION)
        argv = self.confinement.command([sys.executable, "-m", "services.verifier.harness.candidate"])
        self.printed = OutputTail()  # in the judge's memory: a file would take as much disk as route code writes
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=self.printed.write_fd,
                stderr=subprocess.STDOUT,
                env=env,
                pass_fds=(to_candidate, to_judge, handover_end.fileno()),
                start_new_session=True,  # its own process group, killed as one
            )
        except BaseException:  # nothing of it outlives the failed start in the judge (the check goes on or ends)
            for fd in (to_candidate, to_judge, from_candidate, from_judge, self.printed.read_fd, self.printed.write_fd):
                os.close(fd)
            for sock in (self.handover, handover_end):
                sock.close()
            self.gate.close()
            self.confinement.close()
            raise
        self.printed.start()
        os.close(to_candidate)
        os.close(to_judge)
        handover_end.close()
        self.channel = Channel(from_candidate, from_judge)
        self._fds = (from_candidate, from_judge)
        self.dead: str | None = None
        self.caps_hit: list[str] | None = None  # the caps it had run into when the judge killed it
        self.waiting_at: float | None = None  # when it had loaded torch, by its own clock (before any route code)
        self.go_at: float | None = None
        self.ready_at: float | None = None  # calibrated: route code may come

    def go(self, output_bytes: int) -> None:
        """The references are done: the candidate may start CUDA, map the output region (``output_bytes``, the
        largest reference output) and then run route code. Ends with the channel's calibration, measured before any
        route code is imported."""
        limit_s = max(problem_time_limit_s(), 120)
        deadline = time.monotonic() + limit_s
        waiting, _ = self.recv(deadline, during="start-up", limit_s=limit_s)
        reported = waiting.get("waiting_at")
        if isinstance(reported, float) and math.isfinite(reported):
            self.waiting_at = reported
        self.output_bytes = output_bytes
        size = max(output_bytes, CALIBRATION_BYTES[self.setup.profile])
        self.outputs = Region.create(flat_places(size), self.ctx.device)
        self.go_at = time.monotonic()
        self.hand_over(self.outputs)
        with contextlib.suppress(OSError):  # as hand_over: the answer says how a candidate that is gone ended
            send_region(self.handover, self.gate.fd)
        self.ask({"op": "references_done", "output_bytes": self.outputs.size}, deadline, reply=False)
        self.recv(deadline, during="references_done", limit_s=limit_s)
        self.calibrate()
        self.ready_at = time.monotonic()

    # -- talking to it ---------------------------------------------------------------------------------------------
    def hand_over(self, region: Region) -> None:
        """Sends the descriptor of memory the judge made on the handover socket; the order that follows tells the
        candidate what it is."""
        with contextlib.suppress(OSError):  # a candidate that is gone: the order that follows says how it ended
            send_region(self.handover, region.fd)

    def ask(self, order: dict, deadline: float, max_payload: int = 0, reply: bool = True):
        """Sends an order and returns (header, payload); CandidateDied when the process is gone or hangs."""
        if self.dead:
            raise CandidateDied(self.dead)
        try:
            self.channel.send(order)
        except ChannelClosed:
            self._ended(order["op"], "ended")
        if not reply:
            return None, None
        return self.recv(deadline, max_payload, during=order["op"])

    def recv(self, deadline: float, max_payload: int = 0, during: str = "timed", limit_s: float | None = None):
        """The next answer, to the order named ``during``; ``limit_s``: what the deadline allowed, for the reason."""
        try:
            return self.channel.recv(deadline, max_payload)
        except ChannelTimeout:
            self.kill()
            limit = problem_time_limit_s() if limit_s is None else limit_s
            raise CandidateDied(self._died(f"gave no answer to '{during}' within the {limit:.0f} s limit")) from None
        except ChannelClosed:
            self._ended(during, "ended")
        except ProtocolError:
            self._ended(during, "broke the channel")

    def take_output(self, into: torch.Tensor) -> None:
        """Copies an output of ``into.numel()`` bytes out of the output region into the judge's own memory, and waits
        for the copy to be done: the candidate may write the region again as soon as it gets its next order, and
        route code may write it at any time, so the judge compares only its copy."""
        into.copy_(self.outputs.tensors[0][: into.numel()])
        self.ctx.kit.sync()

    def _ended(self, during: str, what: str) -> NoReturn:
        self.note_caps()
        if what == "ended":  # let it finish ending: its exit status says how
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
        self.kill()
        raise CandidateDied(self._died(f"{what} during '{during}'"))

    def _died(self, what: str) -> str:
        code = self.proc.poll()
        caps = self.caps_hit if self.caps_hit is not None else self.confinement.exceeded()
        if code is not None and code > 128 and self.confinement.bwrap and code - 128 in signal.valid_signals():
            code = 128 - code  # bubblewrap exits 128 + N when what it ran was killed by signal N
        if code is not None and code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            caught = {"SIGXCPU": "its CPU-time cap", "SIGXFSZ": "its file-size cap"}.get(name)
            how = f"was killed by {name}" + (f": it exceeded {caught}" if caught else "")
        elif code is not None:
            how = f"exited with code {code}"
        else:
            how = "was killed by the judge"
        how += ran_into(caps)
        tail = self.printed.text(400)
        self.dead = f"route: the candidate process {what} and {how}" + (f" (its output ends: {tail!r})" if tail else "")
        return self.dead

    def calibrate(self) -> None:
        """What the gate's protocol costs around an empty call, measured before any route code is imported, at the
        smallest output and the largest the check judges (a timed call's cost grows with its output's copies): from
        the judge's open to the device's done word (``gate_empty_ms``), the judge's copy of the output after it
        (``hold_ms``), and the judge's L2 flush while a call waits at the gate (``prepare_ms``). The medians: the
        judge's bound on a route's call takes these off, so a route made quicker here gains nothing later."""
        deadline = time.monotonic() + max(problem_time_limit_s(), 120)
        sizes = sorted({4, max(-(-self.output_bytes // 4) * 4, 4)})
        empty, hold, prepare = {}, {}, []
        for nbytes in sizes:
            snapshot = torch.empty(nbytes, dtype=torch.uint8, device=self.ctx.device)
            opened_to_done, done_to_held = [], []
            for _ in range(CALIBRATION_PINGS):
                self.seq += 1
                self.ask({"op": "gated", "idle": True, "size": nbytes, "seq": self.seq}, deadline, reply=False)
                self.expect_enqueued(deadline)
                began = time.perf_counter()
                self.ctx.kit.prepare_run()
                opened = self.gate.open(self.seq)
                prepare.append((opened - began) * 1e3)
                done = self.gate.wait_done(self.seq, deadline, WAIT_YIELD_EVERY[self.setup.profile])
                if done is None:
                    self.kill()
                    raise CandidateDied(self.died_during("the gate's calibration: no done word"))
                self.take_output(snapshot)
                held = time.perf_counter()
                self.recv(deadline, during="calibration")
                opened_to_done.append((done - opened) * 1e3)
                done_to_held.append((held - done) * 1e3)
            empty[nbytes], hold[nbytes] = Timing.median(opened_to_done), Timing.median(done_to_held)
            del snapshot
        self.gate_costs = (sizes, empty, hold)
        self.prepare_ms = Timing.median(prepare)

    def expect_enqueued(self, deadline: float) -> dict:
        header, _ = self.recv(deadline, during="calibration")
        if "enqueued" not in header:
            raise CandidateDied(self.died_during(f"answered the gate's calibration with {header}"[:300]))
        return header

    def _interpolate(self, costs: dict, nbytes: int) -> float:
        sizes = self.gate_costs[0]
        if len(sizes) == 1:
            return costs[sizes[0]]
        (small, large) = sizes[0], sizes[-1]
        per_byte = max(costs[large] - costs[small], 0.0) / (large - small)
        return costs[small] + per_byte * (min(nbytes, large) - small)

    def gate_empty_ms(self, nbytes: int) -> float:
        """What the judge's clock from the open to the done word sees of an empty call with an output of nbytes."""
        return self._interpolate(self.gate_costs[1], nbytes)

    def hold_ms(self, nbytes: int) -> float:
        """What the judge's copy of an output of nbytes takes after its done word, with nothing else running."""
        return self._interpolate(self.gate_costs[2], nbytes)

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def died_during(self, what: str) -> str:
        return self._died(f"gave no answer to {what}")

    def peak_bytes(self) -> int:
        """The candidate's peak memory on its current problem, as it reports it (route code could write anything
        there: a report for the memory plan, never judged); 0 where it cannot say."""
        if self.dead or self.ready_at is None:
            return 0
        try:
            header, _ = self.ask({"op": "peak_memory"}, time.monotonic() + PEAK_ANSWER_S)
        except CandidateDied:
            return 0
        value = header.get("peak_bytes")
        return value if type(value) is int and 0 <= value <= MAX_PEAK_BYTES else 0

    def note_caps(self) -> None:
        """The caps it ran into, asked once, as early as its end is known: an rlimit's count is of the processes
        still running, before the judge waits for them to end or kills them."""
        if self.caps_hit is None:
            self.caps_hit = self.confinement.exceeded()

    def kill(self) -> None:
        self.note_caps()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        if self.confinement.cgroup is not None:
            self.confinement.cgroup.kill_all()

    def stop(self) -> None:
        """Ends it: nothing of it outlives the problem it was judged on. Killed, not asked: nothing it does on its
        way out counts, and its orderly exit (Python's and CUDA's teardown) took a second of every check's wall."""
        self.kill()
        self.confinement.close()
        self.handover.close()
        self.gate.close()
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.outputs is not None:  # after the kill: nothing maps it on the candidate's side any more
            self.outputs.close()
            self.outputs = None


class Candidates:
    """The candidate process of a check: on the GPU the first one started early (``start_early``), so that its
    interpreter and torch load while the device times the references; each let go only after ``references_done``;
    started again after one died."""

    def __init__(self, ctx: Context, setup: CandidateSetup, workdir: Path):
        self.ctx, self.setup, self.workdir = ctx, setup, workdir
        self.current: CandidateProcess | None = None
        self.started = 0
        self.confinement: dict = {}
        self.output_bytes: int | None = None  # known once every reference is timed; no candidate goes before
        self.timeline: list[dict] = []  # per process let go: its spawned/waiting/go/ready times (time.monotonic)
        # Where no cgroup can be made, memory is capped by an rlimit, which a machine's CUDA might not start under
        # (the H200's does: docs/decisions/0008): a check's first candidate that cannot start under it is
        # started again without it, and so is every later one of the check; this says why.
        self.memory_rlimit_failed: str | None = None

    def start_early(self) -> None:
        self.current = self._spawn()

    def references_done(self, output_bytes: int) -> None:
        self.output_bytes = output_bytes

    def get(self) -> CandidateProcess:
        if self.output_bytes is None:
            raise RuntimeError("no candidate may run route code before every reference of the check is timed")
        if self.current is not None and self.current.dead:
            self.current.stop()
            self.current = None
        if self.current is None:
            self.current = self._spawn()
        if self.current.ready_at is None:
            self._let_go()
            current = self.current
            self.timeline.append(
                {
                    "spawned": current.spawned_at,
                    "waiting": current.waiting_at,
                    "go": current.go_at,
                    "ready": current.ready_at,
                }
            )
            described = current.confinement.describe()
            if self.memory_rlimit_failed:
                described["notes"].append(self.memory_rlimit_failed)
            self.confinement = {
                **described,
                "prepare_ms": current.prepare_ms,
                "gate_empty_ms": {str(k): round(v, 4) for k, v in current.gate_costs[1].items()},
                "hold_ms": {str(k): round(v, 4) for k, v in current.gate_costs[2].items()},
            }
        return self.current

    def _let_go(self) -> None:
        """Lets the current candidate go. Only the judge's code has run in it before it is ready; and before the
        check's first candidate is ready no route code of the check has run at all, so a failure there is the
        machine's: that one, and only that one, is started again without its memory rlimit (a candidate started
        after another died could have been kept from starting by what the route left behind)."""
        while True:
            try:
                self.current.go(self.output_bytes)
                return
            except CandidateDied as err:
                limit = self.current.confinement.memory_limit
                if limit is None or self.timeline:
                    why = f"the candidate process could not start before any route code ran: {err}"
                    raise CouldNotRun(why) from err
                self.current.stop()
                self.memory_rlimit_failed = (
                    f"the candidate could not start under {limit}, so ran without a memory cap: {err}"[:600]
                )
                self.current = self._spawn()

    def _spawn(self) -> CandidateProcess:
        try:
            process = CandidateProcess(self.ctx, self.setup, self.workdir, self.memory_rlimit_failed is None)
        except LookupError as err:
            raise CouldNotRun(str(err)) from err
        self.started += 1
        return process

    def close(self) -> None:
        if self.current is not None:
            self.current.stop()
            self.current = None


def stage_route(route_dir: Path, workdir: Path) -> Path:
    """A copy of the route's Python files the job user can read (the original may lie in a private directory)."""
    staged = workdir / "route"
    staged.mkdir(mode=0o755)
    for path in sorted(route_dir.rglob("*.py")):
        if path.is_symlink() or not path.is_file():
            continue
        target = staged / path.relative_to(route_dir)
        target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        target.chmod(0o644)
    return staged


def make_workdir() -> Path:
    """The judge's own scratch directory: the staged route (readable by the job user)."""
    workdir = Path(tempfile.mkdtemp(prefix="kb-judge-"))
    workdir.chmod(0o711)
    return workdir
