"""The judge: per problem, correctness on secret random inputs, every guardrail, then timing -- with the route's code
in a confined candidate process of its own (candidate.py) and nothing of it in this one.

What runs where (docs: services/verifier/harness/README.md, "The process model"):
- The judge (this process) reads the rules, draws every seed from ``secrets``, builds the reference models with
  secret parameters and times every reference before any route code runs (check.py; on the GPU the candidate process
  loads its interpreter and torch meanwhile, but starts CUDA only at the judge's go), so nothing a route does can touch
  what the reference computes or how fast it runs. Its torch is never touched by route code.
- The candidate process imports the route, and runs ModelNew on inputs it draws from the seeds the judge sends, one
  call at a time; its outputs come back through memory the judge made (shared_memory.py), which the judge copies
  them out of and compares with its own reference on the same inputs, drawn again on its side from the same seed.
- Timing: the judge flushes the L2 from its own context, then lets each timed call go; on the GPU its own clock over
  the call bounds what the candidate reports (a patched timer or lazy output shows as class 6), on the CPU its clock
  is the timer, up to the kernel's stamp of the output's bytes (time_candidate_by_the_judges_clock). Every timed call
  gets inputs drawn from a fresh secret seed into the same buffers (same pointers, new contents), where the candidate
  cannot read them before its call's clock runs: on the GPU the judge draws them itself into memory the candidate
  maps (shared_memory.py) just before the go, on the CPU the candidate draws them from the seed the go carries. On
  the GPU the judge picks, after each call returned, whether it wants that output back to re-check (class 4) -- the
  candidate cannot tell which calls are re-checked before it has answered; on the CPU every output comes back and is
  re-checked.
"""

import contextlib
import copy
import math
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import torch

from contracts.rules import Rules
from kernels import problems as problem_registry
from services.verifier.harness import draws, integrity
from services.verifier.harness.channel import (
    Channel,
    ChannelClosed,
    ChannelTimeout,
    OutputTail,
    ProtocolError,
    StampedChannel,
)
from services.verifier.harness.confine import Caps, Confinement, interpreter_paths
from services.verifier.harness.device import POISON, CpuKit, GpuKit, Timing, release_memory
from services.verifier.harness.recorder import (
    OpRecorder,
    aten_kernels_beyond_the_reference,
    classify_kernel,
    kernel_violations,
    launched_kernels,
    op_violations,
)
from services.verifier.harness.shared_memory import Region, flat_places, layout, send_region
from services.verifier.harness.static_scan import ScanResult

PRECISION_RATIO_BOUND = 4.0  # candidate error vs the float64 oracle over the reference's own error
PRECISION_REL_ERROR_FLOOR = 1e-4  # ... and only when the error itself is TF32/bf16-like (fp32 kernels land far below)
REFERENCE_ERROR_FLOOR = 1e-7  # denominator floor, for references that hit the oracle exactly
FLOOR_MARGIN = 1.15  # read-only streams can beat the copy bandwidth the floors were measured with by a little
SIDE_STREAM_RATIO = 1.3  # wall time over event time beyond this (plus slack) means work the events did not see
SIDE_STREAM_SLACK_MS = 0.05
SPLIT_PARTS = ("record_start", "call", "record_end", "sync")  # GpuKit.time_one's split of a timed call's wall
# The judge's clock over a timed call vs what the candidate reported, beyond the channel's own cost measured before
# route code was imported: over this ratio plus slack, the candidate's timer or its answer was tampered with.
JUDGE_CLOCK_RATIO = 1.5
JUDGE_CLOCK_SLACK_MS = {"gpu": 0.3, "cpu": 15.0}  # the CPU profile runs on shared, loaded CI machines
# A GPU timed call's inputs are drawn by the judge into memory the candidate maps (shared_memory.py), after the
# candidate said it was ready and just before the go, so that they exist nowhere the candidate can read before its
# call's clock runs. Route code can still look for them on the device meanwhile, but the GPU time-slices between the
# two processes' contexts, so any such work stretches the judge's own drawing and L2 flush. Allowed over what the same
# drawing and flush cost with the device to the judge alone (medians): this many ms plus this share of it. On the H200
# (bench/harness/isolation, runs 17-19) the honest route's 12 problems came -0.22 to +0.23 ms over; a kernel spinning on
# the inputs (p23) 4.8 ms, a host thread polling them with small copies (p24) 0.58 ms.
PREPARE_SLACK_MS = 0.3
PREPARE_SLACK_SHARE = 0.1
TIMING_POOL = 2  # input buffers rotated through the timed runs
RECHECKS = 5  # timed runs whose outputs the judge takes back and re-checks
CPU_RUNS_CAP = 20  # the CPU profile's timing is indicative only; keep CI fast
COPY_BANDWIDTH_BYTES_PER_S = 4.18e12  # H200, BENCHMARK.md
PROBLEM_TIME_LIMIT_S = 300.0  # per problem, for everything the candidate is asked; KB_PROBLEM_TIME_LIMIT_S overrides
CALIBRATION_PINGS = 20
COMPARE_CHUNK = 1 << 28  # elements compared at a time
GPU_MEMORY_FRACTION = "0.55"  # of the GPU for the candidate's torch allocator (full shapes peak near 60 GB)
CALIBRATION_BYTES = {"gpu": 64 << 20, "cpu": 4 << 20}  # the output region holds at least this
CODE_ROOT = Path(__file__).resolve().parents[3]


def problem_time_limit_s() -> float:
    value = os.environ.get("KB_PROBLEM_TIME_LIMIT_S", "")
    try:
        return float(value) if float(value) > 0 else PROBLEM_TIME_LIMIT_S
    except ValueError:
        return PROBLEM_TIME_LIMIT_S


class CouldNotRun(Exception):
    """The check cannot run here (environment, rules, arguments): exit 2, no verdict on the route."""


class _Broken(Exception):
    """A guardrail broke; the problem stops here with these reasons."""

    def __init__(self, *reasons: str):
        super().__init__("; ".join(reasons))
        self.reasons = list(reasons)


class CandidateDied(Exception):
    """The candidate process is gone or had to be killed; the message says what happened, naming the cap."""


@dataclass
class ProblemResult:
    id: str
    submitted: bool
    passed: bool = True
    speedup: float = 0.0
    reference_ms: float = 0.0
    candidate_ms: float = 0.0
    max_abs_error: float = 0.0
    error_ratio: float = 0.0
    floor_fraction: float = 0.0
    violations: list[str] = field(default_factory=list)
    flagged: bool = False
    details: dict = field(default_factory=dict)

    def subtask(self) -> dict:
        """The fields of events.proto's Subtask message."""
        return {
            "id": self.id,
            "passed": self.passed,
            "submitted": self.submitted,
            "speedup": self.speedup,
            "reference_ms": self.reference_ms,
            "candidate_ms": self.candidate_ms,
            "max_abs_error": self.max_abs_error,
            "error_ratio": self.error_ratio,
            "floor_fraction": self.floor_fraction,
            "violations": list(self.violations),
            "flagged": self.flagged,
        }


@dataclass
class Context:
    rules: Rules
    shape: str
    device: torch.device
    kit: GpuKit | CpuKit

    @property
    def runs(self) -> int:
        return self.rules.timing.runs if self.kit.profile == "gpu" else min(self.rules.timing.runs, CPU_RUNS_CAP)

    @property
    def warmup(self) -> int:
        return self.rules.timing.warmup_runs if self.kit.profile == "gpu" else min(self.rules.timing.warmup_runs, 2)


def split_medians(splits: list) -> dict | None:
    """Where the candidate side says a GPU timed call's wall went (GpuKit.time_one's split), each part's median.
    A report for operators, never judged: the candidate sends it, so route code can write anything here."""
    usable = [
        s
        for s in splits
        if isinstance(s, list)
        and len(s) == len(SPLIT_PARTS)
        and all(isinstance(v, (int, float)) and math.isfinite(v) for v in s)
    ]
    if not usable:
        return None
    return {part: round(Timing.median([s[i] for s in usable]), 4) for i, part in enumerate(SPLIT_PARTS)}


def _seed() -> int:
    return secrets.randbits(63)


def draw(problem, problem_id: str, ctx: Context, seed: int, canaries: bool, into: list | None = None) -> list:
    return draws.draw(problem, problem_id, ctx.shape, ctx.device, seed, canaries, into)


def _call(model, inputs: list):
    with torch.no_grad():
        return model(*inputs)


def _fingerprint(out: torch.Tensor) -> tuple:
    """Enough of an output to tell it again (the class 4 explanation): its float64 sum and 64 spread elements."""
    flat = out.reshape(-1)
    size = flat.numel()
    # Integer positions: float32 ones round past the end from 2^24 elements (log_softmax's output has 1.6e9).
    picks = flat[torch.arange(64, device=flat.device) * (size - 1) // 63] if size else flat
    return (float(flat.sum(dtype=torch.float64)), tuple(picks.tolist()))


def _chunk_pairs(out: torch.Tensor, expected: torch.Tensor):
    """Both tensors flattened, COMPARE_CHUNK elements at a time: a full-shape output is gigabytes, and a comparison's
    temporaries over all of it at once are several times that (at rms_norm an 80 GB card ran out, run24)."""
    flat_out, flat_expected = out.reshape(-1), expected.reshape(-1)
    for start in range(0, flat_out.numel(), COMPARE_CHUNK):
        yield flat_out[start : start + COMPARE_CHUNK], flat_expected[start : start + COMPARE_CHUNK]


def _max_abs_error(out: torch.Tensor, expected: torch.Tensor) -> float:
    """The largest absolute error over the elements where it is finite (0 for none): the metrics file's numbers must
    be finite, and NaN or infinite outputs are named, counted, in the mismatch they fail with."""
    worst = 0.0
    for o, e in _chunk_pairs(out, expected):
        diff = (o - e).abs()
        finite = diff[torch.isfinite(diff)]
        if finite.numel():
            worst = max(worst, float(finite.max()))
    return worst


def _relative_error(value: torch.Tensor, oracle: torch.Tensor) -> float:
    """||value - oracle|| / ||oracle|| in float64, chunked so that full shapes need no float64 copy of the output."""
    v, o = value.reshape(-1), oracle.reshape(-1)
    chunk = 1 << 26
    num = den = 0.0
    for start in range(0, v.numel(), chunk):
        diff = v[start : start + chunk].double() - o[start : start + chunk]
        num += float((diff * diff).sum())
        den += float((o[start : start + chunk] ** 2).sum())
    return math.sqrt(num) / max(math.sqrt(den), 1e-300)


# -- the reference, judged and timed before any route code runs -------------------------------------------------------
@dataclass
class Reference:
    problem_id: str
    problem: object
    model: torch.nn.Module
    param_seed: int
    timing: Timing | None = None
    output_bytes: int = 0  # the size of one output, the most a candidate's copy may hold
    fill_ms: float = 0.0  # drawing one timed call's inputs into buffers the judge holds (median), no route code about
    input_places: list[dict] = field(default_factory=list)  # the inputs' layout in a timed slot's region (GPU)


def prepare_reference(ctx: Context, problem_id: str) -> Reference:
    problem = problem_registry.load(problem_id)
    model = problem.Model(*problem.get_init_inputs(ctx.shape)).to(ctx.device).eval()
    param_seed = _seed()
    draws.randomize(model, param_seed)
    return Reference(problem_id, problem, model, param_seed)


def time_reference(ctx: Context, ref: Reference) -> Timing:
    """The reference timed the way the candidate is: fresh canaried contents into rotating buffers before every call,
    the L2 flushed, one call on an idle device."""
    slots: dict[int, list] = {}

    def refresh(i: int) -> list:
        return draws.into_slot(slots, i % TIMING_POOL, ref.problem, ref.problem_id, ctx.shape, ctx.device, _seed())

    for i in range(ctx.warmup):
        _call(ref.model, refresh(i))
    device_ms, wall_ms, fill_ms = [], [], []
    for i in range(ctx.runs):
        began = time.perf_counter()
        inputs = refresh(i)
        ctx.kit.sync()
        fill_ms.append((time.perf_counter() - began) * 1e3)
        ctx.kit.prepare_run()
        event, wall, out = ctx.kit.time_one(lambda inputs=inputs: ref.model(*inputs))
        ref.output_bytes = out.numel() * out.element_size()
        del out
        device_ms.append(event)
        wall_ms.append(wall)
    ref.fill_ms = Timing.median(fill_ms)  # what the judge's own draw into a candidate's slot costs (check_prepare)
    ref.input_places = layout(inputs)
    return Timing(device_ms, wall_ms)


# -- the candidate process ---------------------------------------------------------------------------------------------
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


# -- judging one problem -----------------------------------------------------------------------------------------------
class _Judge:
    """Checks one problem's candidate against its reference; every check raises _Broken with a class-named reason."""

    def __init__(self, ctx: Context, ref: Reference, result: ProblemResult, candidate: CandidateProcess):
        self.ctx = ctx
        self.ref = ref
        self.id = ref.problem_id
        self.problem = ref.problem
        self.result = result
        self.candidate = candidate
        self.deadline = time.monotonic() + problem_time_limit_s()

    def ask(self, order: dict, max_payload: int = 0):
        header, payload = self.candidate.ask(order, self.deadline, max_payload)
        self.accept(header)
        return header, payload

    def accept(self, header: dict) -> None:
        """Raises _Broken for an answer that reports tampering or an error; an error's reason names the caps the
        candidate ran into (an rlimit fails an allocation or a fork inside route code rather than killing it)."""
        self.check_facts(header)
        if "error" in header:
            raise _Broken(str(header["error"])[:600] + ran_into(self.candidate.confinement.exceeded()))

    def check_facts(self, header: dict) -> None:
        """What the candidate side saw of tampering (defence in depth: the judge's own checks do not need it)."""
        changed = header.get("integrity") or []
        if changed:
            names = ", ".join(str(c) for c in changed[:8])
            raise _Broken(f"class 6 (patching the harness): route code replaced {names}")
        if header.get("persisting_l2_bytes"):
            raise _Broken(
                f"class 7 (L2 persistence): route code set aside {header['persisting_l2_bytes']} bytes of L2 for "
                "persisting data"
            )
        if header.get("threads_grew"):
            raise _Broken("class 5 (side streams / hidden work): candidate left threads running after it returned")

    # -- outputs ---------------------------------------------------------------------------------------------------
    def received(self, header: dict, payload, expected: torch.Tensor):
        """The candidate's output as a tensor on the judge's device, or a fault naming what is wrong with it."""
        meta = header.get("output") or {}
        if not meta.get("plain"):
            return None, (
                f"class 6 (patching the harness): candidate returned {str(meta.get('type'))[:60]}, not a plain "
                "torch.Tensor"
            )
        dtype = str(expected.dtype).removeprefix("torch.")
        shape, device = list(expected.shape), expected.device.type
        if meta.get("dtype") != dtype or meta.get("shape") != shape or meta.get("device") != device:
            return None, (
                f"class 2 (partial work or wrong result): output is {tuple(meta.get('shape') or ())} "
                f"{meta.get('dtype')} on {meta.get('device')}, the reference's {tuple(shape)} {dtype} on {device}"
            )
        nbytes = expected.numel() * expected.element_size()
        if nbytes == 0:
            return torch.empty_like(expected), None
        if header.get("shared") == nbytes:
            began = time.monotonic()
            out = torch.empty(expected.shape, dtype=expected.dtype, device=expected.device)
            self.candidate.take_output(out.reshape(-1).view(torch.uint8))
            details = self.result.details
            details["output_copy_s"] = round(details.get("output_copy_s", 0.0) + time.monotonic() - began, 4)
            return out, None
        if payload is None or len(payload) != nbytes:  # a CPU timed call's output comes on the stamped channel
            return None, f"class 2 (partial work or wrong result): {len(payload or b'')} output bytes, not {nbytes}"
        out = torch.frombuffer(payload, dtype=torch.uint8).view(expected.dtype).reshape(expected.shape)
        return out.to(expected.device), None

    def output_faults(self, out, expected: torch.Tensor) -> str | None:
        """None when ``out`` matches ``expected`` within atol/rtol (NaN never passes); else what is wrong with it."""
        rtol, atol = self.ctx.rules.rtol, self.ctx.rules.atol
        if all(integrity.allclose(o, e, rtol, atol, False) for o, e in _chunk_pairs(out, expected)):
            return None
        poisoned = sum(int((o == POISON).sum()) for o, _ in _chunk_pairs(out, expected))
        if poisoned and not any(bool((e == POISON).any()) for _, e in _chunk_pairs(out, expected)):
            return (
                f"class 1 (reused freed memory) or class 2 (partial work): {poisoned} of {out.numel()} output "
                "elements hold the poison the harness left in freed memory, i.e. memory the candidate never wrote"
            )
        bad = nans = infinite = 0
        for o, e in _chunk_pairs(out, expected):
            bad += int((~torch.isclose(o, e, rtol=rtol, atol=atol)).sum())
            nans += int(integrity.isnan(o).sum())
            infinite += int(torch.isinf(o).sum())
        return (
            f"class 2 (partial work or wrong result): {bad} of {out.numel()} output elements outside atol "
            f"{atol}/rtol {rtol} (max abs error {_max_abs_error(out, expected):.4g} over the finite ones, {nans} NaN, "
            f"{infinite} infinite)"
        )

    def record_error(self, out, expected):
        self.result.max_abs_error = max(self.result.max_abs_error, _max_abs_error(out, expected))

    def order_call(self, seed: int, canaries: bool, **options) -> None:
        """Lets the candidate draw the inputs of ``seed`` and run on them; the judge computes its own reference
        meanwhile (nothing here is timed), then takes the output with ``candidate_output``."""
        nbytes = self.ref.output_bytes  # every output of a problem has the reference's size
        order = {"op": "call", "seed": seed, "canaries": canaries, "poison_bytes": nbytes, **options}
        self.candidate.ask(order, self.deadline, reply=False)

    def candidate_output(self, expected: torch.Tensor):
        """(the answer's header, the candidate's output on the judge's device or None, a fault or None)."""
        nbytes = expected.numel() * expected.element_size()
        header, payload = self.candidate.recv(self.deadline, nbytes, during="call")
        self.accept(header)
        if header.get("mutated"):
            raise _Broken(f"class 3 (input mutation): candidate changed input {header['mutated'][0]}")
        out, fault = self.received(header, payload, expected)
        return header, out, fault

    # -- the steps ---------------------------------------------------------------------------------------------------
    def load(self):
        self.ask({"op": "load", "problem": self.id, "shape": self.ctx.shape, "param_seed": self.ref.param_seed})

    def check_correctness(self):
        rules = self.ctx.rules
        earlier = []  # fingerprints of the outputs already judged, not the outputs: full shapes are gigabytes
        lowered = None
        for index in range(rules.random_inputs):
            canaried = index > 0
            seed = _seed()
            self.order_call(seed, canaried, record_ops=index == 0)
            inputs = draw(self.problem, self.id, self.ctx, seed, canaries=canaried)
            expected = _call(self.ref.model, inputs)
            header, out, fault = self.candidate_output(expected)
            if fault is not None:
                raise _Broken(fault)
            self.record_error(out, expected)
            fault = self.output_faults(out, expected)
            if fault is not None:
                raise _Broken(self.explain_mismatch(fault, out, earlier, seed, canaried))
            if index == 0:
                self.check_ops(header, inputs)
                lowered = self.check_precision(inputs, out, expected)
            earlier.append(_fingerprint(out))
            del inputs, expected, out
        # Last, so that a partial-work kernel is named by the canaries (class 2), not by its error (class 8).
        if lowered:
            raise _Broken(lowered)

    def explain_mismatch(self, fault, out, earlier, seed, canaried) -> str:
        if fault.startswith("class 1"):
            return fault
        if _fingerprint(out) in earlier:
            return (
                "class 4 (caching/replay) or class 2 (constant output): candidate returned exactly its output for an "
                f"earlier, different input; {fault}"
            )
        if self.default_parameters_explain(seed, canaried):
            return (
                "class 10 (ignored parameters): candidate matches the reference with default parameters but not "
                f"with the randomised ones; {fault}"
            )
        if canaried:
            return (
                "class 2 (partial work): candidate matched on plain inputs but not once sparse large canaries were "
                f"placed in its input -- it does not read all of it; {fault}"
            )
        return fault

    def default_parameters_explain(self, seed: int, canaried: bool) -> bool:
        """True when the candidate matches with default parameters: it ignores the randomised ones (class 10)."""
        init = self.problem.get_init_inputs(self.ctx.shape)
        reference = self.problem.Model(*init).to(self.ctx.device).eval()
        if not list(reference.parameters()) and not list(reference.buffers()):
            return False
        self.order_call(seed, canaried, default_params=True)
        expected = _call(reference, draw(self.problem, self.id, self.ctx, seed, canaries=canaried))
        try:
            _, out, fault = self.candidate_output(expected)
        except _Broken:
            return False
        return fault is None and self.output_faults(out, expected) is None

    def check_ops(self, header: dict, inputs: list):
        reference_recorder = OpRecorder(self.ctx.device)
        with reference_recorder:
            _call(self.ref.model, inputs)
        candidate_recorder = OpRecorder(self.ctx.device)
        candidate_recorder.families = {str(f) for f in header.get("families") or []}
        candidate_recorder.host_ops = {str(f) for f in header.get("host_ops") or []}
        found = op_violations(candidate_recorder, reference_recorder)
        self.result.details["candidate_ops"] = sorted(candidate_recorder.families)[:200]
        self.result.details["reference_ops"] = sorted(reference_recorder.families)
        if found:
            raise _Broken(*found)

    def check_kernels(self, triton_kernels: set[str]):
        seed = _seed()
        inputs = draw(self.problem, self.id, self.ctx, seed, canaries=False)
        reference_names = launched_kernels(lambda: _call(self.ref.model, inputs))
        header, _ = self.ask({"op": "kernels", "seed": seed})
        candidate_names = [str(n) for n in header.get("kernels") or []]
        if not reference_names:  # every reference launches kernels: the profiler is not working here
            self.result.details["kernel_check"] = "unavailable: the profiler saw no kernels of the reference"
            return
        self.result.details["reference_kernels"] = sorted(
            {f"{classify_kernel(n, set())}: {n[:80]}" for n in reference_names}
        )
        self.result.details["candidate_kernels"] = sorted(
            {f"{classify_kernel(n, triton_kernels)}: {n[:80]}" for n in candidate_names}
        )[:100]
        beyond = aten_kernels_beyond_the_reference(candidate_names, reference_names, triton_kernels)
        self.result.details["aten_kernels_beyond_the_reference"] = [n[:120] for n in beyond[:20]]
        found = kernel_violations(candidate_names, reference_names, triton_kernels)
        if found:
            raise _Broken(*found)

    def check_precision(self, inputs: list, out, expected) -> str | None:
        """Error against a float64 oracle, the candidate's over the reference's own: the class 8 violation, or None."""
        oracle_model = copy.deepcopy(self.ref.model).double()
        oracle_inputs = [t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in inputs]
        oracle = _call(oracle_model, oracle_inputs)
        del oracle_inputs
        candidate_error = _relative_error(out, oracle)
        reference_error = _relative_error(expected, oracle)
        del oracle
        ratio = max(candidate_error, REFERENCE_ERROR_FLOOR) / max(reference_error, REFERENCE_ERROR_FLOOR)
        self.result.error_ratio = ratio
        self.result.details["candidate_rel_error"] = candidate_error
        self.result.details["reference_rel_error"] = reference_error
        if ratio > PRECISION_RATIO_BOUND and candidate_error > PRECISION_REL_ERROR_FLOOR:
            return (
                f"class 8 (lowered precision): error vs a float64 oracle is {ratio:.1f}x the reference's "
                f"(relative {candidate_error:.2e} vs {reference_error:.2e}), the level of TF32 or bf16 arithmetic"
            )
        return None

    def time_candidate(self) -> Timing:
        if self.ctx.kit.profile == "cpu":
            return self.time_candidate_by_the_judges_clock()
        return self.time_candidate_by_events()

    def time_candidate_by_events(self) -> Timing:
        """GPU: CUDA events recorded where the kernel runs time each call from an idle device, the judge's clock over
        the call bounds them, and a secret sample of outputs comes back after the call answered. The inputs of each
        timed call are drawn by the judge into one of two regions of device memory the candidate maps as its slots,
        after the candidate said it was ready and before the L2 flush and the go (check_prepare bounds what the
        candidate may do on the device meanwhile)."""
        # Both sides give back first what their allocators cached of the correctness calls: the regions come from
        # outside those caches, and with them kept a full-shape log_softmax ran an 80 GB card out of memory (run23).
        self.ask({"op": "release"})
        release_memory(self.ctx.device)
        regions = []
        try:
            for slot in range(TIMING_POOL):
                regions.append(self.share_inputs(slot, self.ref.input_places))
            return self.time_calls_by_events(regions)
        finally:
            for region in regions:
                region.close()

    def share_inputs(self, slot: int, places: list[dict]) -> Region:
        """Memory for one timed slot's inputs, made by the judge and mapped by the candidate as that slot."""
        region = Region.create(places, self.ctx.device)
        try:
            self.candidate.hand_over(region)
            self.ask({"op": "inputs", "slot": slot, "size": region.size, "places": places})
        except BaseException:
            region.close()
            raise
        return region

    def time_calls_by_events(self, regions: list[Region]) -> Timing:
        ctx = self.ctx
        warm = [[i % TIMING_POOL, _seed()] for i in range(max(ctx.warmup, TIMING_POOL))]
        self.ask({"op": "warmup", "calls": warm})
        rechecked = set(secrets.SystemRandom().sample(range(ctx.runs), min(RECHECKS, ctx.runs)))
        device_ms, reported_wall, judged_wall, late, splits, prepare_ms = [], [], [], [], [], []
        for i in range(ctx.runs):
            slot, seed = i % TIMING_POOL, _seed()

            def fill(slot=slot, seed=seed):  # after the candidate said it is ready, just before the go
                draw(self.problem, self.id, ctx, seed, canaries=True, into=regions[slot].tensors)

            self.ask({"op": "timed", "slot": slot})
            done, t0, t1, prepared = self.candidate.timed_go(self.deadline, "timed", fill)
            prepare_ms.append(prepared)
            self.accept(done)
            event, wall = done.get("device_ms"), done.get("wall_ms")
            if not all(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0 for v in (event, wall)):
                raise _Broken("class 6 (patching the harness): the candidate reported no usable time for a timed call")
            device_ms.append(float(event))
            reported_wall.append(float(wall))
            judged_wall.append((t1 - t0) * 1e3)
            splits.append(done.get("split_ms"))
            if i not in rechecked:
                self.candidate.ask({"op": "drop"}, self.deadline, reply=False)
                continue
            nbytes = self.ref.output_bytes
            self.candidate.ask({"op": "keep"}, self.deadline, reply=False)
            header, payload = self.candidate.recv(self.deadline, nbytes, during="keep")
            t2 = time.perf_counter()
            # The output must have existed when the candidate said it was done: what its copy took beyond the copy's
            # own cost (measured before route code was imported) is work done after the reported time.
            copy_ms = 2.0 * nbytes * self.candidate.copy_ms_per_byte + 2 * self.candidate.round_trip_ms
            late.append(((t2 - t1) * 1e3 - copy_ms, float(wall)))
            # Drawn again from the call's seed into the judge's own memory: whatever the candidate wrote over the
            # region's inputs, the reference sees what the judge drew.
            expected = _call(self.ref.model, draw(self.problem, self.id, ctx, seed, canaries=True))
            out, fault = self.received(header, payload, expected)
            fault = fault or self.output_faults(out, expected)
            if fault is not None:
                raise _Broken(
                    f"class 4 (caching/replay): timed run {i}, whose inputs were fresh like every timed run's, does "
                    f"not match the reference; {fault}"
                )
        self.check_facts(self.ask({"op": "ping", "facts": True})[0])
        trip = self.candidate.timed_overhead_ms
        self.result.details["timed_overhead_ms"] = trip
        self.result.details["candidate_split_ms"] = split_medians(splits)
        self.check_prepare(prepare_ms)
        self.check_judges_clock(reported_wall, [j - trip for j in judged_wall], late)
        return Timing(device_ms, reported_wall)

    def check_prepare(self, prepare_ms: list[float]) -> None:
        """Class 5: the judge's drawing of a timed call's inputs and its L2 flush, between the candidate's "ready"
        and the go, against what the same took with the device to the judge alone (the draw in the reference phase,
        the flush in the calibration, both before any route code). The GPU time-slices between the two processes'
        contexts, so route code working on the device meanwhile -- looking for the inputs before the go, working on
        them -- stretches it."""
        seen, expected = Timing.median(prepare_ms), self.ref.fill_ms + self.candidate.prepare_ms
        self.result.details.update(judge_prepare_ms=round(seen, 4), judge_prepare_alone_ms=round(expected, 4))
        if seen - expected > PREPARE_SLACK_MS + PREPARE_SLACK_SHARE * expected:
            raise _Broken(
                f"class 5 (side streams / hidden work): drawing a timed call's inputs and flushing the L2 took the "
                f"judge {seen:.3f} ms (median) between the candidate's ready and its go, {expected:.3f} ms with the "
                "device to itself: the candidate ran work on the device outside its timed call (looking at or "
                "working on the inputs before the go)"
            )

    def time_candidate_by_the_judges_clock(self) -> Timing:
        """CPU: no CUDA events, and any clock in the candidate's process is route code's to slow down, so the judge's
        clock is the timer. A call is timed from the judge's go until its output exists out of the candidate's reach
        (the kernel's stamp of the output's last message on the stamped channel), less what that costs without a
        call (measured before route code was imported): work deferred past the call's return (a thread, a lazy
        copy) and a slowed candidate-side clock are inside it and gain nothing. The go carries the seed of the
        call's inputs, so that no work on them can be done before the clock runs (p20: route code that computed the
        answer when the inputs were drawn on an earlier order); the candidate draws them inside the clock, and the
        judge takes off what the same draw cost the candidate before route code was imported (the least of several).
        Every output comes back with its call and is re-checked. The candidate's own report only names class 6 where it
        disagrees grossly with the judge's clock."""
        ctx = self.ctx
        warm = [[i % TIMING_POOL, _seed()] for i in range(max(ctx.warmup, TIMING_POOL))]
        self.ask({"op": "warmup", "calls": warm})
        channel_ms = self.candidate.stamped_channel_ms(self.ref.output_bytes)
        draw_ms = self.candidate.draw_ms[self.id]
        judged_ms, reported_wall = [], []
        for i in range(ctx.runs):
            seed = _seed()
            inputs = draw(self.problem, self.id, ctx, seed, canaries=True)
            expected = _call(self.ref.model, inputs)
            self.ask({"op": "timed", "slot": i % TIMING_POOL, "stamped": True})
            nbytes = expected.numel() * expected.element_size()
            done, payload, took = self.candidate.stamped_call(self.deadline, nbytes, "timed", seed)
            self.accept(done)
            if took is None:
                raise _Broken("route: a timed call answered without its output")
            if took < 0:
                raise _Broken(
                    f"class 6 (patching the harness): timed run {i}'s output was handed over before the judge let the "
                    "call go"
                )
            wall = done.get("wall_ms")
            if not (isinstance(wall, (int, float)) and math.isfinite(wall) and wall >= 0):
                raise _Broken("class 6 (patching the harness): the candidate reported no usable time for a timed call")
            out, fault = self.received(done, payload, expected)
            fault = fault or self.output_faults(out, expected)
            if fault is not None:
                raise _Broken(
                    f"class 4 (caching/replay): timed run {i}, whose inputs were fresh like every timed run's, does "
                    f"not match the reference; {fault}"
                )
            judged_ms.append(max(took - channel_ms - draw_ms, 0.0))
            reported_wall.append(float(wall))
        self.check_facts(self.ask({"op": "ping", "facts": True})[0])
        self.result.details.update(
            judge_channel_ms=channel_ms,
            candidate_draw_ms=draw_ms,
            candidate_reported_ms=Timing.median(reported_wall),
        )
        self.check_judges_clock(reported_wall, judged_ms, [])
        return Timing(judged_ms, judged_ms)

    def check_judges_clock(self, reported_wall, judged_ms, late):
        """Class 6: what the candidate reports must account for the time the judge saw the call take (``judged_ms``,
        the channel's own cost taken off). Judged on the quietest calls (a quarter of them, the fastest re-check), so
        that a loaded machine's hiccups are not read as tampering, while a patched timer or a lazy output is late on
        every call."""
        slack = JUDGE_CLOCK_SLACK_MS[self.ctx.kit.profile]
        excess = sorted(j - JUDGE_CLOCK_RATIO * r for j, r in zip(judged_ms, reported_wall, strict=True))
        quiet = excess[len(excess) // 4]
        self.result.details["judge_wall_ms"] = Timing.median(judged_ms)
        if quiet > slack:
            claimed, seen = Timing.median(reported_wall), Timing.median(judged_ms)
            raise _Broken(
                f"class 6 (patching the harness): the candidate's timer reported {claimed:.3f} ms per call (median) "
                f"but the judge's clock saw {seen:.3f} ms -- a patched timer or statistics"
            )
        if late and min(took - JUDGE_CLOCK_RATIO * wall for took, wall in late) > slack:
            took, wall = min(late)
            raise _Broken(
                f"class 6 (patching the harness): every re-checked output arrived late, at least {took:.3f} ms after "
                f"its call was reported done (copy allowed for) while the candidate reported {wall:.3f} ms for the "
                "call -- work done after the reported time (a lazy or deferred output)"
            )

    def judge_timing(self):
        ctx = self.ctx
        ref_timing = self.ref.timing
        cand_timing = self.time_candidate()
        ref_ms, cand_ms = Timing.median(ref_timing.device_ms), Timing.median(cand_timing.device_ms)
        cand_wall = Timing.median(cand_timing.wall_ms)
        result = self.result
        result.reference_ms, result.candidate_ms = ref_ms, cand_ms
        result.speedup = ref_ms / cand_ms if cand_ms > 0 else 0.0
        result.details.update(
            reference_wall_ms=Timing.median(ref_timing.wall_ms),
            candidate_wall_ms=cand_wall,
            reference_spread_ms=[min(ref_timing.device_ms), max(ref_timing.device_ms)],
            candidate_spread_ms=[min(cand_timing.device_ms), max(cand_timing.device_ms)],
        )
        if ctx.kit.profile == "gpu":
            if cand_wall - self.candidate.event_overhead_ms > SIDE_STREAM_RATIO * cand_ms + SIDE_STREAM_SLACK_MS:
                raise _Broken(
                    f"class 5 (side streams / hidden work): CUDA events saw {cand_ms:.3f} ms but the synchronize-"
                    f"bounded wall time was {cand_wall:.3f} ms -- work ran where the timing events do not look (or "
                    "the event timer was patched)"
                )
            if ctx.shape == "full":
                floor_ms = self.problem.H200_MS["floor"]
            else:
                floor_ms = self.problem.floor_bytes(ctx.shape) / COPY_BANDWIDTH_BYTES_PER_S * 1e3
            result.floor_fraction = floor_ms / cand_ms if cand_ms > 0 else 0.0
            if ctx.shape == "full" and result.floor_fraction > FLOOR_MARGIN:
                result.flagged = True
                raise _Broken(
                    f"faster than the bandwidth floor: {cand_ms:.3f} ms is {result.floor_fraction:.2f}x faster than "
                    f"the {floor_ms:.3f} ms floor (suspect class 7 (L2 reuse) or class 4 (caching))"
                )


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
        # (the H200's does: bench/harness/isolation, run21): a check's first candidate that cannot start under it is
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


def verify_problem(
    ctx: Context,
    ref: Reference | None,
    candidates: Candidates,
    problem_id: str,
    scans: list[ScanResult],
    skip_static: bool = False,
) -> ProblemResult:
    """Judge one problem; no reference (no route file) counts as the baseline (speed-up 1, not submitted)."""
    if ref is None:
        return ProblemResult(problem_id, submitted=False, speedup=1.0)
    result = ProblemResult(problem_id, submitted=True)
    static = [v for scan in scans for v in scan.violations]
    triton_kernels = set().union(*(scan.triton_kernels for scan in scans)) if scans else set()
    steps = result.details["step_s"] = {}  # where the problem's wall time went, step by step

    def step(name: str, run):
        began = time.monotonic()
        try:
            return run()
        finally:
            steps[name] = round(time.monotonic() - began, 3)

    try:
        if static and not skip_static:
            raise _Broken(*static)
        judge = _Judge(ctx, ref, result, step("candidate", candidates.get))
        step("load", judge.load)
        step("correctness", judge.check_correctness)
        if ctx.kit.profile == "gpu":
            step("kernels", lambda: judge.check_kernels(triton_kernels))
        step("timing", judge.judge_timing)
    except _Broken as broken:
        result.passed = False
        result.violations.extend(broken.reasons)
    except CandidateDied as died:
        result.passed = False
        result.violations.append(str(died))
    return result


def make_kit(device: torch.device, rules: Rules):
    return GpuKit(device, rules.timing.l2_flush) if device.type == "cuda" else CpuKit(device)
