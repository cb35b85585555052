"""The judge's flow for one problem: per problem, correctness on secret random inputs, every guardrail, then timing --
with the route's code in a confined candidate process of its own (candidate.py, started and driven through
candidate_process.py) and nothing of it in this one.

What runs where (docs/verifier-harness.md, "The process model"):
- The judge (this process) reads the rules, draws every seed from ``secrets``, builds the reference models with
  secret parameters and times every reference before any route code runs (check.py, timing.time_reference; on the
  GPU the candidate process loads its interpreter and torch meanwhile, but starts CUDA only at the judge's go), so
  nothing a route does can touch what the reference computes or how fast it runs. Its torch is never touched by route
  code.
- The candidate process imports the route, and runs ModelNew on inputs it draws from the seeds the judge sends, one
  call at a time; its outputs come back through memory the judge made (shared_memory.py), which the judge copies
  them out of and compares with its own reference on the same inputs, drawn again on its side from the same seed
  (compare.py).
- Timing (timing.py, entered by ``judge_timing``): the judge flushes the L2 from its own context, then lets each timed
  call go; on the GPU its own clock over the call bounds what the candidate reports (a patched timer or lazy output
  shows as class 6), on the CPU its clock is the timer, up to the kernel's stamp of the output's bytes. Every timed
  call gets inputs drawn from a fresh secret seed into the same buffers (same pointers, new contents), where the
  candidate cannot read them before its call's clock runs. On the GPU the judge picks, after each call returned,
  whether it wants that output back to re-check (class 4); on the CPU every output comes back and is re-checked.
"""

import os
import sys
import time
import traceback

import torch

from contracts.rules import Rules
from kernels import problems as problem_registry
from kernels.problems.memory import size_text
from services.verifier.harness import draws, memory
from services.verifier.harness.candidate_process import CandidateProcess, Candidates, ran_into
from services.verifier.harness.compare import fingerprint, max_abs_error, output_faults, received
from services.verifier.harness.context import (
    Broken,
    CandidateDied,
    Context,
    CouldNotRun,
    ProblemResult,
    Reference,
    draw,
    problem_time_limit_s,
    run_model,
    secret_seed,
)
from services.verifier.harness.device import CpuKit, GpuKit
from services.verifier.harness.recorder import (
    OpRecorder,
    op_violations,
)
from services.verifier.harness.static_scan import ScanResult
from services.verifier.harness.timing import judge_timing

TEST_JUDGE_FAILS = "KB_TEST_JUDGE_FAILS"  # tests only: the problem whose judging fails on the judge's side


def prepare_reference(ctx: Context, problem_id: str) -> Reference:
    problem = problem_registry.load(problem_id)
    model = problem.Model(*problem.get_init_inputs(ctx.shape)).to(ctx.device).eval()
    param_seed = secret_seed()
    draws.randomize(model, param_seed)
    return Reference(problem_id, problem, model, param_seed)


class Judge:
    """Checks one problem's candidate against its reference, step by step; every check raises Broken with a
    class-named reason."""

    def __init__(
        self,
        ctx: Context,
        ref: Reference,
        result: ProblemResult,
        candidate: CandidateProcess,
        triton_kernels: set[str] = frozenset(),
    ):
        self.ctx = ctx
        self.triton_kernels = set(triton_kernels)  # the route's own kernels, by the static pass (the census's)
        self.reference_ops: OpRecorder | None = None  # the reference's ops, recorded by the correctness calls
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
        """Raises Broken for an answer that reports tampering or an error; an error's reason names the caps the
        candidate ran into (an rlimit fails an allocation or a fork inside route code rather than killing it)."""
        self.check_facts(header)
        if "error" in header:
            raise Broken(str(header["error"])[:600] + ran_into(self.candidate.confinement.exceeded()))

    def check_facts(self, header: dict) -> None:
        """What the candidate side saw of tampering (defence in depth: the judge's own checks do not need it)."""
        changed = header.get("integrity") or []
        if changed:
            names = ", ".join(str(c) for c in changed[:8])
            raise Broken(f"class 6 (patching the harness): route code replaced {names}")
        if header.get("persisting_l2_bytes"):
            raise Broken(
                f"class 7 (L2 persistence): route code set aside {header['persisting_l2_bytes']} bytes of L2 for "
                "persisting data"
            )
        if header.get("threads_grew"):
            raise Broken("class 5 (side streams / hidden work): candidate left threads running after it returned")

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
            raise Broken(f"class 3 (input mutation): candidate changed input {header['mutated'][0]}")
        out, fault = received(header, payload, expected, self.candidate, self.result.details)
        return header, out, fault

    # -- the steps ---------------------------------------------------------------------------------------------------
    def load(self):
        self.ask({"op": "load", "problem": self.id, "shape": self.ctx.shape, "param_seed": self.ref.param_seed})

    def check_correctness(self):
        """``random_inputs`` calls on fresh inputs, canaries in every one, the dispatch recorder on every one: no
        call here differs from another (precision and the kernel census are judged on secretly sampled timed calls,
        gated.py)."""
        rules = self.ctx.rules
        earlier = []  # fingerprints of the outputs already judged, not the outputs: full shapes are gigabytes
        for _ in range(rules.random_inputs):
            seed = secret_seed()
            self.order_call(seed, True, record_ops=True)
            inputs = draw(self.problem, self.id, self.ctx, seed, canaries=True)
            reference_ops = OpRecorder(self.ctx.device)
            with reference_ops:
                expected = run_model(self.ref.model, inputs)
            header, out, fault = self.candidate_output(expected)
            if fault is not None:
                raise Broken(fault)
            self.result.max_abs_error = max(self.result.max_abs_error, max_abs_error(out, expected))
            fault = output_faults(out, expected, self.ctx.rules)
            if fault is not None:
                raise Broken(self.explain_mismatch(fault, out, earlier, seed, True))
            self.check_ops(header, reference_ops)
            self.reference_ops = reference_ops  # what every timed call's ops are judged against (gated.py)
            fail_if_a_test_says_so(self.id)
            earlier.append(fingerprint(out))
            del inputs, expected, out

    def explain_mismatch(self, fault, out, earlier, seed, canaried) -> str:
        if fault.startswith("class 1"):
            return fault
        if fingerprint(out) in earlier:
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
        expected = run_model(reference, draw(self.problem, self.id, self.ctx, seed, canaries=canaried))
        try:
            _, out, fault = self.candidate_output(expected)
        except Broken:
            return False
        return fault is None and output_faults(out, expected, self.ctx.rules) is None

    def check_ops(self, header: dict, reference_ops: OpRecorder):
        candidate_ops = OpRecorder(self.ctx.device)
        candidate_ops.families = {str(f) for f in header.get("families") or []}
        candidate_ops.host_ops = {str(f) for f in header.get("host_ops") or []}
        found = op_violations(candidate_ops, reference_ops)
        self.result.details["candidate_ops"] = sorted(candidate_ops.families)[:200]
        self.result.details["reference_ops"] = sorted(reference_ops.families)
        if found:
            raise Broken(*found)


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

    memory.reset_peak(ctx.device)
    candidate = None
    try:
        if static and not skip_static:
            raise Broken(*static)
        candidate = step("candidate", candidates.get)
        judge = Judge(ctx, ref, result, candidate, triton_kernels)
        step("load", judge.load)
        step("correctness", judge.check_correctness)
        step("timing", lambda: judge_timing(judge))
    except Broken as broken:
        result.passed = False
        result.violations.extend(broken.reasons)
    except CandidateDied as died:
        result.passed = False
        result.violations.append(str(died))
    except CouldNotRun:
        raise
    except Exception as err:  # noqa: BLE001 -- the judge's own failure: this problem is not judged, the others are
        traceback.print_exception(err, file=sys.stderr)
        result.passed = False
        result.not_judged = judge_failure(ctx, problem_id, err)
        candidates.close()  # what it was doing when the judge failed is unknown: the next problem gets a new one
        candidate = None
    result.peak_judge_bytes = memory.peak_bytes(ctx.device)
    if candidate is not None:
        result.peak_candidate_bytes = candidate.peak_bytes()
    return result


def judge_failure(ctx: Context, problem_id: str, err: Exception) -> str:
    """Why a problem was not judged, for the person who runs the check: the judge's own failure, not the route's."""
    what = (str(err).strip().splitlines() or [""])[0][:200]
    if not isinstance(err, torch.OutOfMemoryError):
        return (
            f"{problem_id} not judged: the judge itself failed ({type(err).__name__}: {what}); not the route's doing, "
            "the check is incomplete and can be run again"
        )
    free, total = memory.free_bytes(ctx.device)
    need = ctx.needs.get(problem_id)
    needs = f"needs about {size_text(need.total)} of device memory, " if need else ""
    return (
        f"{problem_id} not judged on this card: the judge ran out of memory ({what}); it {needs}the card has "
        f"{size_text(total)} with {size_text(free)} free"
    )


def fail_if_a_test_says_so(problem_id: str) -> None:
    """The test seam of a judge-side failure (tests/harness): where KB_TEST_JUDGE_FAILS names this problem, the judge
    runs out of memory after its first comparison, as it did at rms_norm on an 80 GB card (issue 42). The candidate
    process is never given the variable."""
    if os.environ.get(TEST_JUDGE_FAILS) == problem_id:
        raise torch.OutOfMemoryError(f"{TEST_JUDGE_FAILS} names {problem_id}: an out-of-memory error a test injected")


def make_kit(device: torch.device, rules: Rules):
    return GpuKit(device, rules.timing.l2_flush) if device.type == "cuda" else CpuKit(device)
