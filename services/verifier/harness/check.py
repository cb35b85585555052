"""A whole check: every problem of the rules over one route directory, and the metrics file the rules name."""

import math
import os
import random
import secrets
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path

import torch

from contracts import rules as rules_file
from contracts.metrics import VERIFIER_VERSION
from services.verifier.harness import memory, noise
from services.verifier.harness.candidate_process import Candidates, CandidateSetup, make_workdir, stage_route
from services.verifier.harness.confine import Caps
from services.verifier.harness.context import Context, CouldNotRun, ProblemResult
from services.verifier.harness.device import release_memory
from services.verifier.harness.gated import TIMING_PROTOCOL
from services.verifier.harness.static_scan import scan_route
from services.verifier.harness.timing import time_reference
from services.verifier.harness.verify import judge_failure, make_kit, prepare_reference, verify_problem


def candidate_caps(device: str) -> Caps:
    """The candidate process's caps; KB_CANDIDATE_MEMORY_MB / _PIDS / _FILE_MB / _DISK_MB / _CPU_S override them."""

    def number(name: str, default: int) -> int:
        value = os.environ.get(name, "")
        return int(value) if value.isdigit() and int(value) > 0 else default

    gpu = device == "cuda"
    return Caps(
        memory_bytes=number("KB_CANDIDATE_MEMORY_MB", 32768 if gpu else 4096) << 20,
        pids=number("KB_CANDIDATE_PIDS", 512 if gpu else 128),
        file_bytes=number("KB_CANDIDATE_FILE_MB", 1024) << 20,
        disk_bytes=number("KB_CANDIDATE_DISK_MB", 2048) << 20,
        cpu_s=number("KB_CANDIDATE_CPU_S", 1800),
    )


def private_dirs(metrics_path: str | Path | None) -> list[str]:
    """What the candidate must not see: the metrics file's directory, KB_HOME, the kb sign-in."""
    found = [str(Path.home() / ".config" / "kernelboard")]
    if os.environ.get("KB_HOME"):
        found.append(os.environ["KB_HOME"])
    if metrics_path is not None:
        found.append(str(Path(metrics_path).resolve().parent))
    return found


def process_started() -> float | None:
    """When this process started, on time.monotonic()'s clock (None where /proc cannot say): the interpreter's start
    and its imports are part of a check's wall time too (the metrics file's ``phases``)."""
    try:
        with open("/proc/self/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        since_boot = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # stat's field 22, starttime, in ticks since boot
    except (OSError, ValueError, IndexError):
        return None
    return time.monotonic() - (time.clock_gettime(time.CLOCK_BOOTTIME) - since_boot)


def geometric_mean(values: list[float]) -> float:
    if not values:
        return 0.0
    return math.exp(sum(math.log(v) for v in values) / len(values))


def score_of(results: list[ProblemResult]) -> float:
    """Geometric mean of the speed-ups; a problem not submitted, or never timed because it failed, counts as 1."""
    return geometric_mean([r.speedup if r.submitted and r.speedup > 0 else 1.0 for r in results])


def noise_of(results: list[ProblemResult]) -> tuple[float, float]:
    """Each judged problem's speed-up interval (kept on it) and the score's, from the timed calls' own spread
    (noise.py): what ranks the check beside others on the board."""
    rng = random.Random(secrets.randbits(64))
    items = []
    for r in results:
        if r.submitted and r.reference_calls_ms and r.candidate_calls_ms:
            r.speedup_interval = noise.speedup_interval(r.reference_calls_ms, r.candidate_calls_ms, rng)
            items.append((r.reference_calls_ms, r.candidate_calls_ms))
        else:
            items.append(r.speedup if r.submitted and r.speedup > 0 else 1.0)
    return noise.score_interval(items, rng)


def rules_commit_of(rules_path: Path) -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(rules_path.parent), "log", "-1", "--format=%H", "--", rules_path.name],
            capture_output=True,
            text=True,
            timeout=10,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _versions() -> dict:
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    return {"torch": torch.__version__, "triton": triton_version, "cuda": torch.version.cuda}


def run_check(
    route_dir: str | Path,
    rules_path: str | Path,
    *,
    rules_commit: str | None = None,
    shapes: str = "full",
    only: list[str] | None = None,
    device: str | None = None,
    skip_static: bool = False,
    metrics_path: str | Path | None = None,
    memory_budget: int | None = None,
) -> dict:
    """Judge a route directory; returns the metrics document, after the candidate process has exited. Raises
    CouldNotRun when it cannot judge here. ``metrics_path``'s directory is hidden from the candidate;
    ``memory_budget`` (bytes, else KB_MEMORY_BUDGET_MB): plan as if the card had only this much free."""
    started = time.monotonic()
    rules_path = Path(rules_path)
    try:
        rules = rules_file.load_file(rules_path)
    except rules_file.RulesError as err:
        raise CouldNotRun(f"rules: {err}") from err
    route_dir = Path(route_dir)
    if not route_dir.is_dir():
        raise CouldNotRun(f"route directory {route_dir} does not exist")
    if shapes not in ("full", "smoke"):
        raise CouldNotRun(f"--shapes must be full or smoke, not {shapes!r}")
    device_name = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device_name == "cuda" and not torch.cuda.is_available():
        raise CouldNotRun("--device cuda asked for, but torch sees no CUDA device here")
    if device_name not in ("cuda", "cpu"):
        raise CouldNotRun(f"--device must be cuda or cpu, not {device_name!r}")
    if shapes == "full" and device_name == "cpu":
        raise CouldNotRun("full shapes need a GPU (several GB per problem); use --shapes smoke for the CPU profile")
    if rules.timing.protocol != TIMING_PROTOCOL:
        raise CouldNotRun(
            f"the rules time by {rules.timing.protocol!r}; this verifier (version {VERIFIER_VERSION}) applies "
            f"{TIMING_PROTOCOL!r} only: a check under those rules needs the verifier of their benchmark version"
        )
    unknown = sorted(set(only or ()) - set(rules.kernels))
    if unknown:
        raise CouldNotRun(f"--only names problems the rules do not list: {', '.join(unknown)}")
    problem_ids = [pid for pid in rules.kernels if not only or pid in only]

    torch_device = torch.device(device_name)
    kit = make_kit(torch_device, rules)
    ctx = Context(rules, shapes, torch_device, kit)
    scans = scan_route(route_dir)
    problem_files = {f"{pid}.py" for pid in rules.kernels}
    shared_scans = [scan for rel, scan in scans.items() if rel not in problem_files]
    own_scans = {pid: ([scans[f"{pid}.py"]] if f"{pid}.py" in scans else []) + shared_scans for pid in problem_ids}
    submitted = [pid for pid in problem_ids if (route_dir / f"{pid}.py").is_file()]
    # Said before, not after: a problem the card cannot hold is not judged, and not started (docs/verifier-harness.md,
    # "The memory plan").
    budget = memory.budget_from_env() if memory_budget is None else memory_budget
    ctx.needs, not_judged = memory.plan(submitted, shapes, torch_device, budget)
    for reason in not_judged.values():
        print(f"kb verify: {reason}", file=sys.stderr, flush=True)
    free, total = memory.free_bytes(torch_device)
    memory_plan = {
        "free_bytes": free,
        "total_bytes": total,
        "budget_bytes": budget,
        "needs": {pid: {"judge": n.judge, "candidate": n.candidate, "total": n.total} for pid, n in ctx.needs.items()},
    }
    submitted = [pid for pid in submitted if pid not in not_judged]

    import kernels.problems

    workdir = make_workdir()
    setup = CandidateSetup(
        route_dir=stage_route(route_dir, workdir),
        problems_root=Path(kernels.problems.__file__).resolve().parents[2],
        hidden=tuple(private_dirs(metrics_path)),
        caps=candidate_caps(device_name),
        profile=kit.profile,
        problem_ids=tuple(submitted),
    )
    candidates = Candidates(ctx, setup, workdir)
    references = {}
    results = []
    problem_phases = {}
    try:
        # Where the device times the references, the candidate loads its interpreter and torch meanwhile, but starts
        # neither CUDA nor route code before every reference is built with secret parameters and timed
        # (docs/verifier-harness.md, "The process model"). The CPU profile's timer is the host's, which that start-up
        # would share: it starts after.
        needed = any(skip_static or not any(scan.violations for scan in own_scans[pid]) for pid in submitted)
        if needed and kit.profile == "gpu":
            candidates.start_early()
        reference_started = time.monotonic()
        for pid in submitted:
            try:
                references[pid] = prepare_reference(ctx, pid)
                references[pid].timing = time_reference(ctx, references[pid])
            except Exception as err:  # noqa: BLE001 -- the judge's own failure: that problem is not judged
                traceback.print_exception(err, file=sys.stderr)
                references.pop(pid, None)
                not_judged[pid] = judge_failure(ctx, pid, err)
            release_memory(torch_device)
        reference_ended = time.monotonic()
        candidates.references_done(max((ref.output_bytes for ref in references.values()), default=0))

        for pid in problem_ids:
            problem_started = time.monotonic()
            if pid in not_judged:
                results.append(ProblemResult(pid, submitted=True, passed=False, not_judged=not_judged[pid]))
            else:
                results.append(verify_problem(ctx, references.get(pid), candidates, pid, own_scans[pid], skip_static))
            release_memory(torch_device)
            problem_phases[pid] = [problem_started, time.monotonic()]
            done = results[-1]
            print(  # progress on stderr, so that a check stopped by its time limit still shows how far it got
                f"kb verify: {pid} passed={done.passed} speedup={done.speedup:.4f} ref_ms={done.reference_ms:.3f} "
                f"cand_ms={done.candidate_ms:.3f} at {time.monotonic() - started:.1f} s",
                file=sys.stderr,
                flush=True,
            )
    finally:
        candidates.close()  # the candidate has exited before the judge writes anything
        shutil.rmtree(workdir, ignore_errors=True)
    ended = time.monotonic()
    wall_s = ended - started
    origin = process_started() or started  # where /proc cannot say, phases count from the check's start

    def since_origin(value):
        """Seconds since the judge process started, to the millisecond (lists and dicts of them alike)."""
        if isinstance(value, dict):
            return {key: since_origin(item) for key, item in value.items()}
        if isinstance(value, list):
            return [since_origin(item) for item in value]
        return None if value is None else round(value - origin, 3)

    phases = since_origin(
        {
            "check_started": started,
            "reference_phase": [reference_started, reference_ended],
            "candidates": candidates.timeline,
            "problems": problem_phases,
            "check_ended": ended,
        }
    )

    reasons = [f"{r.id}: {v}" for r in results for v in r.violations]
    passed = not reasons
    interval = noise_of(results) if passed else None
    unverified = []
    if kit.profile != "gpu":
        unverified.append("CPU profile: correctness and guardrails checked, times from a host timer")
    elif kit.runner != rules.runner_gpu:
        unverified.append(f"runner {kit.runner!r} is not the pinned GPU {rules.runner_gpu!r}")
    if shapes != "full":
        unverified.append(f"{shapes} shapes, not the benchmark's full shapes")
    if any("kernel_check" in r.details for r in results):
        unverified.append("the profiler saw no kernels, so launched kernels were not classified")
    if skip_static:
        unverified.append("static pass skipped (--skip-static, for testing the dynamic defenses)")
    confinement = candidates.confinement
    if confinement and (confinement.get("user") != "kb-job" and confinement.get("uid") == os.geteuid()):
        unverified.append("the candidate ran as the judge's own user (the judge was not started as root)")
    incomplete = [r.id for r in results if r.not_judged]
    if incomplete:
        unverified.append(f"incomplete: {', '.join(incomplete)} not judged")
    if len(problem_ids) != len(rules.kernels):
        unverified.append(f"only {', '.join(problem_ids)} judged (--only)")
    return {
        "verifier_version": VERIFIER_VERSION,
        "benchmark_version": rules.benchmark_version,
        "passed": passed,
        "incomplete": bool(incomplete),
        "verified": passed and not unverified,
        "not_verified_because": unverified,
        "reasons": reasons,
        "score": score_of(results),
        **({"score_interval": [round(v, 6) for v in interval]} if interval else {}),
        "timing_protocol": TIMING_PROTOCOL,
        "cost": wall_s if kit.profile == "gpu" else 0.0,
        "wall_s": wall_s,
        "subtasks": [r.subtask() for r in results],
        "details": {r.id: r.details for r in results},
        "runner": kit.runner,
        "profile": kit.profile,
        "timer": kit.timer,
        "shapes": shapes,
        "rules_commit": rules_commit or rules_commit_of(rules_path),
        "memory_plan": memory_plan,
        "isolation": {
            "candidate": confinement,
            "candidate_processes": candidates.started,
            "reference_phase_s": reference_ended - reference_started,
        },
        "phases": phases,
        "rules_file": str(rules_path),
        "route_dir": str(route_dir),
        "guardrails": {
            "atol": rules.atol,
            "rtol": rules.rtol,
            "random_inputs": rules.random_inputs,
            "runs": rules.timing.runs if kit.profile == "gpu" else min(rules.timing.runs, 20),
            "warmup_runs": rules.timing.warmup_runs,
            "l2_flush_bytes": kit.flush_bytes,
            "persisting_l2_reset": kit.persisting_reset,
        },
        **_versions(),
    }
