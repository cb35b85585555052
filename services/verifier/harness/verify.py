"""Judging a route: per problem, correctness on secret random inputs, every guardrail, then timing.

The order matters and is part of the defense:
1. The reference runs first, on its own clone of the inputs; its output stays alive while the candidate runs (class 1)
   and is overwritten with POISON before it is freed. Freed blocks of the output's size are poisoned too, so output
   memory the candidate never wrote shows (classes 1 and 2).
2. The candidate runs on another clone; the pristine inputs are compared with that clone afterwards (class 3).
3. Input set 0 is plain; the others carry sparse large canaries (class 2); all come from os.urandom seeds.
4. Timing rotates a pool of input sets and refreshes a slot in place before sampled runs whose outputs are re-checked
   against the reference (class 4: caches keyed on pointers or shapes, warm-up detection, replay).
"""

import copy
import gc
import importlib.util
import math
import secrets
import signal
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import torch

from contracts.rules import Rules
from kernels import problems as problem_registry
from services.verifier.harness import integrity
from services.verifier.harness.canaries import add_canaries
from services.verifier.harness.device import POISON, CpuKit, GpuKit, Timing
from services.verifier.harness.recorder import (
    OpRecorder,
    classify_kernel,
    kernel_violations,
    launched_kernels,
    op_violations,
)
from services.verifier.harness.static_scan import ScanResult

PRECISION_RATIO_BOUND = 4.0  # candidate error vs the float64 oracle over the reference's own error
PRECISION_REL_ERROR_FLOOR = 1e-4  # ... and only when the error itself is TF32/bf16-like (fp32 kernels land far below)
REFERENCE_ERROR_FLOOR = 1e-7  # denominator floor, for references that hit the oracle exactly
FLOOR_MARGIN = 1.15  # read-only streams can beat the copy bandwidth the floors were measured with by a little
SIDE_STREAM_RATIO = 1.3  # wall time over event time beyond this (plus slack) means work the events did not see
SIDE_STREAM_SLACK_MS = 0.05
TIMING_POOL = 2  # distinct input sets rotated through the timed runs
RECHECKS = 5  # timed runs whose inputs are refreshed in place and whose outputs are re-checked
CPU_RUNS_CAP = 20  # the CPU profile's timing is indicative only; keep CI fast
COPY_BANDWIDTH_BYTES_PER_S = 4.18e12  # H200, BENCHMARK.md
PROBLEM_TIME_LIMIT_S = 300


class CouldNotRun(Exception):
    """The check cannot run here (environment, rules, arguments): exit 2, no verdict on the route."""


class _Broken(Exception):
    """A guardrail broke; the problem stops here with these reasons."""

    def __init__(self, *reasons: str):
        super().__init__("; ".join(reasons))
        self.reasons = list(reasons)


class _TimeLimit(Exception):
    pass


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
    snapshot: integrity.Snapshot
    route_dir: Path

    @property
    def runs(self) -> int:
        return self.rules.timing.runs if self.kit.profile == "gpu" else min(self.rules.timing.runs, CPU_RUNS_CAP)

    @property
    def warmup(self) -> int:
        return self.rules.timing.warmup_runs if self.kit.profile == "gpu" else min(self.rules.timing.warmup_runs, 2)


def _secret_generator(device: torch.device) -> torch.Generator:
    generator = torch.Generator(device=device)
    generator.manual_seed(secrets.randbits(63))
    return generator


def _draw(problem, problem_id: str, ctx: Context, canaries: bool) -> list:
    generator = _secret_generator(ctx.device)
    inputs = problem.get_inputs(ctx.shape, device=ctx.device, generator=generator)
    if canaries:
        add_canaries(problem_id, inputs, generator)
    return inputs


def _clone(inputs: list) -> list:
    return [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]


def _call(model, inputs: list):
    with torch.no_grad():
        return model(*inputs)


def _randomize(model: torch.nn.Module, generator: torch.Generator):
    """Every floating parameter and buffer uniform in [-1, 1): no default (weight 1, bias 0) survives (class 10)."""
    with torch.no_grad():
        for tensor in list(model.parameters()) + list(model.buffers()):
            if tensor.is_floating_point():
                draw = torch.rand(tensor.shape, generator=generator, device=tensor.device, dtype=tensor.dtype)
                tensor.copy_(draw * 2 - 1)


def _load_route_module(path: Path, problem_id: str):
    spec = importlib.util.spec_from_file_location(f"kb_route_{problem_id}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


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


class _Judge:
    """Checks one problem's candidate against its reference; every check raises _Broken with a class-named reason."""

    def __init__(self, ctx: Context, problem_id: str, result: ProblemResult):
        self.ctx = ctx
        self.id = problem_id
        self.result = result
        self.problem = problem_registry.load(problem_id)

    # -- guards around every candidate call --------------------------------------------------------------------------
    def candidate_call(self, model, inputs: list, recorder: OpRecorder | None = None):
        threads_before = integrity.active_threads()
        try:
            if recorder is not None:
                with recorder:
                    out = _call(model, inputs)
            else:
                out = _call(model, inputs)
            self.ctx.kit.sync()
        except _TimeLimit:
            raise
        except Exception as err:  # the route's code failed; that is the route's problem, not the harness's
            self.check_integrity()
            raise _Broken(f"route: candidate raised {type(err).__name__}: {str(err)[:300]}") from err
        self.check_integrity()
        if integrity.active_threads() > threads_before:
            raise _Broken("class 5 (side streams / hidden work): candidate left threads running after it returned")
        return out

    def check_integrity(self):
        changed = self.ctx.snapshot.changes()
        if changed:
            raise _Broken(f"class 6 (patching the harness): route code replaced {', '.join(changed[:8])}")
        reserved = self.ctx.kit.persisting_limit()
        if reserved:
            self.ctx.kit.clear_persisting_limit()
            raise _Broken(f"class 7 (L2 persistence): route code set aside {reserved} bytes of L2 for persisting data")

    # -- output comparison -------------------------------------------------------------------------------------------
    def output_faults(self, out, expected: torch.Tensor) -> str | None:
        """None when ``out`` matches ``expected`` within atol/rtol (NaN never passes); else what is wrong with it."""
        if type(out) is not integrity.tensor_type:
            return f"class 6 (patching the harness): candidate returned {type(out).__name__}, not a plain torch.Tensor"
        if out.shape != expected.shape or out.dtype != expected.dtype or out.device != expected.device:
            return (
                f"class 2 (partial work or wrong result): output is {tuple(out.shape)} {out.dtype} on {out.device}, "
                f"the reference's {tuple(expected.shape)} {expected.dtype} on {expected.device}"
            )
        if integrity.allclose(out, expected, rtol=self.ctx.rules.rtol, atol=self.ctx.rules.atol, equal_nan=False):
            return None
        poisoned = int((out == POISON).sum())
        if poisoned and not bool((expected == POISON).any()):
            return (
                f"class 1 (reused freed memory) or class 2 (partial work): {poisoned} of {out.numel()} output "
                "elements hold the poison the harness left in freed memory, i.e. memory the candidate never wrote"
            )
        diff = (out - expected).abs()
        bad = int((~torch.isclose(out, expected, rtol=self.ctx.rules.rtol, atol=self.ctx.rules.atol)).sum())
        nans = int(integrity.isnan(out).sum())
        return (
            f"class 2 (partial work or wrong result): {bad} of {out.numel()} output elements outside atol "
            f"{self.ctx.rules.atol}/rtol {self.ctx.rules.rtol} (max abs error {float(diff.max()):.4g}, {nans} NaN)"
        )

    def record_error(self, out, expected):
        if type(out) is integrity.tensor_type and out.shape == expected.shape and out.dtype == expected.dtype:
            err = float((out - expected).abs().max()) if out.numel() else 0.0
            self.result.max_abs_error = max(self.result.max_abs_error, err)

    # -- the steps ---------------------------------------------------------------------------------------------------
    def build_models(self, route_module):
        init = self.problem.get_init_inputs(self.ctx.shape)
        reference = self.problem.Model(*init).to(self.ctx.device).eval()
        _randomize(reference, _secret_generator(self.ctx.device))
        model_new = getattr(route_module, "ModelNew", None)
        if model_new is None:
            raise _Broken(f"route: {self.id}.py defines no ModelNew")
        try:
            candidate = model_new(*init)
        except Exception as err:
            raise _Broken(f"route: ModelNew{tuple(init)} raised {type(err).__name__}: {str(err)[:300]}") from err
        self.check_integrity()
        if not isinstance(candidate, torch.nn.Module):
            raise _Broken(f"route: ModelNew is {type(candidate).__name__}, not a torch.nn.Module")
        candidate = candidate.to(self.ctx.device).eval()
        try:
            candidate.load_state_dict(reference.state_dict(), strict=True)
        except RuntimeError as err:
            raise _Broken(
                "class 10 (ignored parameters): ModelNew's parameters and buffers do not match the reference's "
                f"names and shapes: {str(err).splitlines()[-1].strip()[:300]}"
            ) from err
        return reference, candidate

    def default_parameters_explain(self, inputs: list) -> bool:
        """True when the candidate matches with default parameters: it ignores the randomised ones (class 10)."""
        init = self.problem.get_init_inputs(self.ctx.shape)
        reference = self.problem.Model(*init).to(self.ctx.device).eval()
        if not list(reference.parameters()) and not list(reference.buffers()):
            return False
        candidate = self.candidate_module.ModelNew(*init).to(self.ctx.device).eval()
        candidate.load_state_dict(reference.state_dict(), strict=True)
        expected = _call(reference, _clone(inputs))
        out = self.candidate_call(candidate, _clone(inputs))
        return self.output_faults(out, expected) is None

    def check_correctness(self, reference, candidate):
        rules = self.ctx.rules
        previous_out = None
        for index in range(rules.random_inputs):
            canaried = index > 0
            inputs = _draw(self.problem, self.id, self.ctx, canaries=canaried)
            expected = _call(reference, _clone(inputs))
            self.ctx.kit.sync()
            candidate_inputs = _clone(inputs)
            self.ctx.kit.poison_free_memory(expected.numel() * expected.element_size())
            recorder = OpRecorder(self.ctx.device) if index == 0 else None
            out = self.candidate_call(candidate, candidate_inputs, recorder)
            for position, (pristine, seen) in enumerate(zip(inputs, candidate_inputs, strict=True)):
                if isinstance(pristine, torch.Tensor) and not integrity.equal(pristine, seen):
                    raise _Broken(f"class 3 (input mutation): candidate changed input {position}")
            fault = self.output_faults(out, expected)
            self.record_error(out, expected)
            if fault is not None:
                raise _Broken(self.explain_mismatch(fault, out, previous_out, inputs, canaried))
            if index == 0:
                self.check_ops(reference, recorder, inputs)
                plain = (inputs, out, expected.clone())  # judged for precision once the canaries had their say
            expected.fill_(POISON)  # scrubbed before it is freed: the allocator must not hand an answer back
            del expected
            previous_out = out
        # Last, so that a partial-work kernel is named by the canaries (class 2), not by its error (class 8).
        self.check_precision(reference, *plain)

    def explain_mismatch(self, fault, out, previous_out, inputs, canaried) -> str:
        if fault.startswith(("class 1", "class 6")) or not isinstance(out, torch.Tensor):
            return fault
        same_as_before = isinstance(previous_out, torch.Tensor) and previous_out.shape == out.shape
        if same_as_before and integrity.equal(previous_out, out):
            return (
                "class 4 (caching/replay) or class 2 (constant output): candidate returned exactly its output for an "
                f"earlier, different input; {fault}"
            )
        try:
            if self.default_parameters_explain(inputs):
                return (
                    "class 10 (ignored parameters): candidate matches the reference with default parameters but not "
                    f"with the randomised ones; {fault}"
                )
        except _Broken:
            pass
        if canaried:
            return (
                "class 2 (partial work): candidate matched on plain inputs but not once sparse large canaries were "
                f"placed in its input -- it does not read all of it; {fault}"
            )
        return fault

    def check_ops(self, reference, candidate_recorder: OpRecorder, inputs: list):
        reference_recorder = OpRecorder(self.ctx.device)
        reference_inputs = _clone(inputs)
        with reference_recorder:
            _call(reference, reference_inputs)
        found = op_violations(candidate_recorder, reference_recorder)
        self.result.details["candidate_ops"] = sorted(candidate_recorder.families)
        self.result.details["reference_ops"] = sorted(reference_recorder.families)
        if found:
            raise _Broken(*found)

    def check_kernels(self, reference, candidate, triton_kernels: set[str]):
        inputs = _draw(self.problem, self.id, self.ctx, canaries=False)
        ref_args, cand_args = _clone(inputs), _clone(inputs)
        reference_names = launched_kernels(lambda: _call(reference, ref_args))
        candidate_names = launched_kernels(lambda: _call(candidate, cand_args))
        self.check_integrity()
        if not reference_names:  # every reference launches kernels: the profiler is not working here
            self.result.details["kernel_check"] = "unavailable: the profiler saw no kernels of the reference"
            return
        self.result.details["reference_kernels"] = sorted(
            {f"{classify_kernel(n, set())}: {n[:80]}" for n in reference_names}
        )
        self.result.details["candidate_kernels"] = sorted(
            {f"{classify_kernel(n, triton_kernels)}: {n[:80]}" for n in candidate_names}
        )
        found = kernel_violations(candidate_names, reference_names, triton_kernels)
        if found:
            raise _Broken(*found)

    def check_precision(self, reference, inputs: list, out, expected):
        """Error against a float64 oracle, the candidate's over the reference's own (class 8)."""
        oracle_model = copy.deepcopy(reference).double()
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
            raise _Broken(
                f"class 8 (lowered precision): error vs a float64 oracle is {ratio:.1f}x the reference's "
                f"(relative {candidate_error:.2e} vs {reference_error:.2e}), the level of TF32 or bf16 arithmetic"
            )

    def time_model(self, model, reference, recheck: bool) -> Timing:
        ctx = self.ctx
        pool = [_draw(self.problem, self.id, ctx, canaries=False) for _ in range(TIMING_POOL)]
        sampled = secrets.SystemRandom().sample(range(ctx.runs), min(RECHECKS, ctx.runs))
        recheck_runs = set(sampled) if recheck else set()
        expected = {}

        def before_run(i):
            if i in recheck_runs:
                slot = pool[i % TIMING_POOL]
                fresh = _draw(self.problem, self.id, ctx, canaries=True)
                for target, source in zip(slot, fresh, strict=True):
                    if isinstance(target, torch.Tensor):
                        target.copy_(source)  # same pointer, new contents: a pointer-keyed cache goes stale
                del fresh
                expected[i] = _call(reference, _clone(slot))

        def call(i):
            out = _call(model, pool[i % TIMING_POOL])
            return (i, out) if i in recheck_runs else None

        for i in range(ctx.warmup):
            _call(model, pool[i % TIMING_POOL])
        ctx.kit.sync()
        threads_before = integrity.active_threads()
        timing, kept = ctx.kit.time_runs(call, ctx.runs, before_run)
        self.check_integrity()
        if recheck and integrity.active_threads() > threads_before:
            raise _Broken("class 5 (side streams / hidden work): candidate left threads running after timed runs")
        for i, out in kept:
            fault = self.output_faults(out, expected[i])
            if fault is not None:
                raise _Broken(
                    f"class 4 (caching/replay): timed run {i}, whose inputs were refreshed in place, does not match "
                    f"the reference; {fault}"
                )
        return timing

    def time_both(self, reference, candidate):
        ctx = self.ctx
        ref_timing = self.time_model(reference, reference, recheck=False)
        cand_timing = self.time_model(candidate, reference, recheck=True)
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
            if cand_wall > SIDE_STREAM_RATIO * cand_ms + SIDE_STREAM_SLACK_MS:
                raise _Broken(
                    f"class 5 (side streams / hidden work): CUDA events saw {cand_ms:.3f} ms but the synchronize-"
                    f"bounded wall time was {cand_wall:.3f} ms -- work ran where the timing events do not look"
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


def verify_problem(
    ctx: Context, problem_id: str, route_file: Path | None, scans: list[ScanResult], skip_static: bool = False
) -> ProblemResult:
    """Judge one problem; a missing route file counts as the baseline (speed-up 1, not submitted)."""
    if route_file is None:
        return ProblemResult(problem_id, submitted=False, speedup=1.0)
    result = ProblemResult(problem_id, submitted=True)
    static = [v for scan in scans for v in scan.violations]
    triton_kernels = set().union(*(scan.triton_kernels for scan in scans)) if scans else set()
    judge = _Judge(ctx, problem_id, result)

    def on_alarm(signum, frame):
        raise _TimeLimit()

    use_alarm = hasattr(signal, "SIGALRM") and threading.current_thread() is threading.main_thread()
    if use_alarm:
        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.alarm(PROBLEM_TIME_LIMIT_S)
    try:
        if static and not skip_static:
            raise _Broken(*static)
        try:
            judge.candidate_module = _load_route_module(route_file, problem_id)
        except _TimeLimit:
            raise
        except Exception as err:
            judge.check_integrity()
            raise _Broken(f"route: {route_file.name} failed to import: {type(err).__name__}: {str(err)[:300]}") from err
        judge.check_integrity()
        reference, candidate = judge.build_models(judge.candidate_module)
        judge.check_correctness(reference, candidate)
        if ctx.kit.profile == "gpu":
            judge.check_kernels(reference, candidate, triton_kernels)
        judge.time_both(reference, candidate)
    except _Broken as broken:
        result.passed = False
        result.violations.extend(broken.reasons)
    except _TimeLimit:
        result.passed = False
        result.violations.append(f"route: {problem_id} took longer than {PROBLEM_TIME_LIMIT_S} s to judge")
    finally:
        if use_alarm:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
    return result


def release_memory(device: torch.device):
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()


def make_kit(device: torch.device, rules: Rules):
    return GpuKit(device, rules.timing.l2_flush) if device.type == "cuda" else CpuKit(device)
