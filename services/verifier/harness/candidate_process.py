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

from services.verifier.harness.channel import (
    Channel,
    ChannelClosed,
    ChannelTimeout,
    OutputTail,
    ProtocolError,
    StampedChannel,
)
from services.verifier.harness.confine import Caps, Confinement, interpreter_paths
from services.verifier.harness.context import CandidateDied, Context, CouldNotRun, problem_time_limit_s
from services.verifier.harness.device import Timing
from services.verifier.harness.shared_memory import Region, flat_places, send_region
from services.verifier.harness.timing import split_medians

CALIBRATION_PINGS = 20
GPU_MEMORY_FRACTION = "0.55"  # of the GPU for the candidate's torch allocator (full shapes peak near 60 GB)
CALIBRATION_BYTES = {"gpu": 64 << 20, "cpu": 4 << 20}  # the output region holds at least this
CODE_ROOT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class CandidateSetup:
    route_dir: Path  # the staged copy the candidate reads
    problems_root: Path  # where `kernels.problems` is imported from
    hidden: tuple[str, ...]  # the judge's files: the metrics file's directory, KB_HOME, tokens
    caps: Caps
    profile: str  # gpu | cpu
    problem_ids: tuple[str, ...] = ()  # the problems the candidate will be asked to run (the CPU profile's draw costs)


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
        self.stamped, stamped_end = StampedChannel.pair()
        # Descriptors of the memory the judge makes for outputs and GPU timed calls' inputs (shared_memory.py).
        self.handover, handover_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "PYTHONPATH": str(CODE_ROOT),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1",
            "KB_CHANNEL_FDS": f"{to_candidate},{to_judge}",
            "KB_STAMPED_FD": str(stamped_end.fileno()),
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
                pass_fds=(to_candidate, to_judge, stamped_end.fileno(), handover_end.fileno()),
                start_new_session=True,  # its own process group, killed as one
            )
        except BaseException:  # nothing of it outlives the failed start in the judge (the check goes on or ends)
            for fd in (to_candidate, to_judge, from_candidate, from_judge, self.printed.read_fd, self.printed.write_fd):
                os.close(fd)
            for sock in (self.stamped.sock, stamped_end, self.handover, handover_end):
                sock.close()
            self.confinement.close()
            raise
        self.printed.start()
        os.close(to_candidate)
        os.close(to_judge)
        stamped_end.close()
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
        """The channel's own cost, measured before any route code is imported: a round trip (with a device
        synchronize) and a copy back per byte. The judge's clock checks allow exactly these on top of a call."""
        deadline = time.monotonic() + max(problem_time_limit_s(), 120)
        trips = []
        for _ in range(CALIBRATION_PINGS):
            t0 = time.perf_counter()
            header, _ = self.ask({"op": "ping"}, deadline)
            trips.append((time.perf_counter() - t0) * 1e3)
        self.round_trip_ms = Timing.median(trips)
        nbytes = CALIBRATION_BYTES[self.setup.profile]  # one crossing of the output region
        copies = []
        for _ in range(3):
            t0 = time.perf_counter()
            self.ask({"op": "echo", "size": nbytes}, deadline, max_payload=nbytes)
            copies.append((time.perf_counter() - t0) * 1e3 - self.round_trip_ms)
        self.copy_ms_per_byte = max(min(copies), 0.0) / nbytes
        # the GPU's timed protocol only
        self.timed_overhead_ms = self.event_overhead_ms = self.idle_split_ms = self.prepare_ms = None
        if self.setup.profile == "cpu":
            self.calibrate_stamped(deadline)
        else:
            self.calibrate_timed(deadline)

    def calibrate_timed(self, deadline: float) -> None:
        """The GPU's timed protocol around an empty call: what the judge's clock sees beyond the candidate's reported
        time (the channel, the candidate's context taking the device back after the judge's flush), what the
        candidate's own wall time shows beyond its events (event records, the synchronize), and what the judge's
        flush costs after the candidate's context had the device (``prepare_ms``: the switch back, the flush)."""
        around, beyond_events, splits, prepare = [], [], [], []
        for _ in range(CALIBRATION_PINGS):
            self.ask({"op": "idle"}, deadline)
            done, went, answered, prepared = self.timed_go(deadline, "idle")
            prepare.append(prepared)
            around.append((answered - went) * 1e3 - done["wall_ms"])
            beyond_events.append(done["wall_ms"] - done["device_ms"])
            splits.append(done.get("split_ms"))
        self.timed_overhead_ms = max(Timing.median(around), 0.0)
        self.event_overhead_ms = max(Timing.median(beyond_events), 0.0)
        self.idle_split_ms = split_medians(splits)
        self.prepare_ms = Timing.median(prepare)

    def timed_go(self, deadline: float, during: str, fill=None) -> tuple[dict, float, float, float]:
        """The judge's half of a GPU timed call the candidate has said it is ready for: ``fill`` (the call's inputs
        drawn into the memory the candidate maps), the L2 flushed from the judge's context (the L2 is the device's),
        the go, the answer; with the judge's clock (time.perf_counter) at the go and at the answer, and the ms the
        fill and flush took. The calibration's empty calls and every timed call go through here, so that what the
        calibration measures is what a timed call pays."""
        began = time.perf_counter()
        if fill is not None:
            fill()
        self.ctx.kit.prepare_run()
        went = time.perf_counter()
        self.ask({"op": "go"}, deadline, reply=False)
        done, _ = self.recv(deadline, during=during)
        return done, went, time.perf_counter(), (went - began) * 1e3

    def calibrate_stamped(self, deadline: float) -> None:
        """The CPU profile's timed call without the call: from the judge's go to the kernel's stamp of an output of
        4 bytes and of the largest output judged, the least of several tries each. The least, not the median: the
        judge's clock less this is the CPU profile's timer, and route code that later makes its side quicker than it
        was here gains at most the difference."""
        largest = max(-(-self.output_bytes // 4) * 4, 4096)
        least = {}
        for nbytes in (4, largest):
            took = []
            for _ in range(CALIBRATION_PINGS):
                self.ask({"op": "echo", "size": nbytes, "stamped": True}, deadline)
                header, _, ms = self.stamped_call(deadline, nbytes, "echo")
                if ms is None or ms < 0:
                    raise CandidateDied(self._died(f"answered the channel's calibration with {header}"[:300]))
                took.append(ms)
            least[nbytes] = min(took)
        (small, fixed), (large, most) = sorted(least.items())
        self.stamped_ms_per_byte = max(most - fixed, 0.0) / (large - small)
        self.stamped_fixed_ms = fixed - small * self.stamped_ms_per_byte
        # What drawing each problem's inputs costs the candidate's own process, which draws them inside the judge's
        # clock: measured there (the least of several draws), where the judge's own draw in another process can be
        # slower (a judge inside a busier process measured every call of tiny problems as 0 ms).
        self.draw_ms = {}
        for problem_id in self.setup.problem_ids:
            header, _ = self.ask({"op": "draw_cost", "problem": problem_id, "tries": CALIBRATION_PINGS}, deadline)
            cost = header.get("ms")
            if not (isinstance(cost, (int, float)) and math.isfinite(cost) and cost >= 0):
                raise CandidateDied(self._died(f"answered the draw's calibration with {header}"[:300]))
            self.draw_ms[problem_id] = float(cost)

    def stamped_channel_ms(self, nbytes: int) -> float:
        """What a CPU timed call with an output of ``nbytes`` costs without the call."""
        return self.stamped_fixed_ms + nbytes * self.stamped_ms_per_byte

    def stamped_call(self, deadline: float, max_payload: int, during: str, seed: int = 0):
        """Lets a CPU timed call the candidate is ready for go, with the seed of its inputs, and takes its output off
        the stamped channel: (header, payload, ms from the go to the kernel's stamp of the output's last message;
        negative if it was handed over before the go). An answer on the pipe instead (a failure) comes back as (that
        header, None, None)."""
        try:
            started = self.stamped.go(seed)
            got = self.stamped.recv(deadline, max_payload, unless_readable=self.channel.read_fd)
        except ChannelTimeout:
            self.kill()
            raise CandidateDied(self._died(f"gave no answer to '{during}' in time")) from None
        except (ChannelClosed, ProtocolError, OSError) as err:
            self.note_caps()
            if not isinstance(err, ProtocolError):
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=5)
            self.kill()
            what = "broke the stamped channel" if isinstance(err, ProtocolError) else "ended"
            raise CandidateDied(self._died(f"{what} during '{during}'")) from None
        if got is None:
            header, _ = self.recv(deadline, during=during)
            return header, None, None
        header, payload, stamp = got
        return header, payload, (stamp - started) / 1e6

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
        self.stamped.sock.close()
        self.handover.close()
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
                "round_trip_ms": current.round_trip_ms,
                "prepare_ms": current.prepare_ms,
                "timed_overhead_ms": current.timed_overhead_ms,
                "event_overhead_ms": current.event_overhead_ms,
                "idle_split_ms": current.idle_split_ms,
                "copy_gb_per_s": (1e-6 / current.copy_ms_per_byte) if current.copy_ms_per_byte else None,
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
