# One file past 500 lines: one command on a lent GPU (check, time, and render what that run measured, or render a
# recorded JSON again); its measuring and its table are read together, and matmul_sweep.py reuses its timing.
"""Check and time the project's Triton route (kernels/triton/) against PyTorch eager and torch.compile on one GPU.

For every problem (or those named by --only), in one process:
1. correctness: fresh random inputs (a new seed per draw), the output memory poisoned with NaN before our run, our
   output compared with the fp32 reference (atol = rtol = 1e-2, no NaN) and both with a float64 oracle
   (||out - oracle|| / ||oracle||); the same for every launch variant of ours;
2. timing: the median of --runs runs, each after a 256 MB L2 flush, timed with CUDA events: eager, torch.compile
   (unless --no-compile) and ours (ModelNew as shipped), plus every variant (--variant-runs runs each); each of
   eager, compile and ours is timed twice, in the two ways a GPU kernel is commonly timed:
   - *busy* (back to back, as triton.testing.do_bench does): the flush is queued, then the call, so the call's host
     work (Python, launcher, allocation) overlaps the flush and only GPU time is measured;
   - *idle* (as the verifier does, services/verifier/harness/device.py): synchronize, flush, synchronize, event, call,
     event, so the call's host work is inside the measured time. The board's score is the geometric mean of the
     idle speed-ups over eager;
3. results: $OUT/h200.json (raw numbers, merged into --merge FILE if given), $OUT/RESULTS.md and $OUT/speedup.png.

Usage on the device machine:  python bench/kernels/run.py --out $OUT [--only ID ...] [--no-compile] [--merge FILE]
Re-render the table from a JSON file:  python bench/kernels/run.py --render kernels/results/h200.json --out DIR
"""

import argparse
import datetime
import gc
import importlib
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kernels.problems import PROBLEM_IDS  # noqa: E402

# the order runs cheapest first and puts the one kernel that waits across programs (log_softmax's cooperative
# launch) last, so that a hang there loses nothing already measured
RUN_ORDER = (
    "new_gelu",
    "hinge_loss",
    "huber_loss",
    "kl_div",
    "triplet_margin_loss",
    "cross_entropy",
    "rms_norm",
    "layer_norm",
    "sum_dim",
    "cumsum_reverse",
    "matmul",
    "log_softmax",
)
COMPUTE_BOUND = {"matmul"}
SHAPE = "full"  # --shape; smoke only for a local dry run of this script
DEVICE = "cuda"  # --device; cpu only for a local dry run under TRITON_INTERPRET=1
FP32_UNIT_ROUNDOFF = 2.0**-24
L2_FLUSH_BYTES = 256 * 1024 * 1024


def rel_error(out, oracle) -> float:
    """||out - oracle|| / ||oracle|| in float64, in slices so that no full-size float64 temporary is made."""
    import torch

    a = out.reshape(-1)
    b = oracle.reshape(-1)
    num = torch.zeros((), dtype=torch.float64, device=b.device)
    den = torch.zeros((), dtype=torch.float64, device=b.device)
    step = 1 << 26
    for i in range(0, b.numel(), step):
        d = a[i : i + step].double() - b[i : i + step]
        num += (d * d).sum()
        den += (b[i : i + step] * b[i : i + step]).sum()
    if not torch.isfinite(num):
        return math.inf
    return math.sqrt(num.item()) / max(math.sqrt(den.item()), 1e-300)


def allclose_report(out, ref) -> dict:
    import torch

    a = out.reshape(-1)
    b = ref.reshape(-1)
    worst = 0.0
    nan = False
    ok = True
    step = 1 << 26
    for i in range(0, b.numel(), step):
        x, y = a[i : i + step], b[i : i + step]
        nan = nan or bool(torch.isnan(x).any())
        ok = ok and bool(torch.allclose(x, y, atol=1e-2, rtol=1e-2))
        worst = max(worst, float((x - y).abs().max()))
    return {"allclose": ok and not nan and out.shape == ref.shape, "max_abs_diff": worst, "nan": nan}


def sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def free_memory() -> None:
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


class Timer:
    def __init__(self, device):
        import torch

        self.torch = torch
        self.device = device
        self.flush_buf = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device=device)

    def median_ms(self, fn, runs: int, warmup: int = 3) -> tuple[float, list[float]]:
        torch = self.torch
        if self.device.type != "cuda":  # a local dry run of the script (interpreter, smoke shapes): wall clock
            times = []
            for _ in range(max(1, runs)):
                t0 = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t0) * 1e3)
            return statistics.median(times), times
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
        for i in range(runs):
            self.flush_buf.zero_()
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize()
        times = [s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)]
        return statistics.median(times), times

    def idle_median_ms(self, fn, runs: int, warmup: int = 3) -> float:
        """The verifier's way: every call starts on an idle GPU, so its host-side launch cost is in the time."""
        if self.device.type != "cuda":
            return self.median_ms(fn, runs, warmup)[0]
        torch = self.torch
        for _ in range(warmup):
            fn()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
        for i in range(runs):
            torch.cuda.synchronize()
            self.flush_buf.fill_(1)
            torch.cuda.synchronize()
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True))


def poison_memory(numel: int, device) -> None:
    """Fill freed allocator memory with NaN so an output that is not fully written shows NaN."""
    import torch

    filler = torch.full((numel,), float("nan"), dtype=torch.float32, device=device)
    del filler


def make_models(problem, route, device, seed: int):
    import torch

    init = problem.get_init_inputs(SHAPE)
    torch.manual_seed(seed)
    ref = problem.Model(*init)
    # random parameters, so that an ignored weight or bias shows (defaults 1 and 0 would hide it)
    with torch.no_grad():
        for name, p in ref.named_parameters():
            p.copy_(torch.randn_like(p) * 0.5 + (1.0 if name.endswith("weight") else 0.0))
    ours = route.ModelNew(*init)
    ours.load_state_dict(ref.state_dict(), strict=True)
    return ref.to(device).eval(), ours.to(device).eval()


def check_once(problem, ref, ours, device, seed: int, variant) -> dict:
    import copy

    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    inputs = problem.get_inputs(SHAPE, device=device, generator=gen)
    with torch.no_grad():
        ref_out = ref(*inputs)
        sync(device)
        oracle_model = copy.deepcopy(ref).double()
        oracle_out = oracle_model(*[x.double() if x.is_floating_point() else x for x in inputs])
        del oracle_model
        err_ref = rel_error(ref_out, oracle_out)
        poison_memory(ref_out.numel(), device)
        before = [x.sum(dtype=torch.float64) for x in inputs]
        ours.variant = variant
        try:  # a variant that fails to build must not stay selected for the shipped version's timing
            out = ours(*inputs)
            sync(device)
        finally:
            ours.variant = None
        close = allclose_report(out, ref_out)
        err_ours = rel_error(out, oracle_out)
        inputs_kept = all(bool(a == x.sum(dtype=torch.float64)) for a, x in zip(before, inputs, strict=True))
    del inputs, ref_out, oracle_out, out, before
    free_memory()
    return {
        "seed": seed,
        **close,
        "inputs_unchanged": inputs_kept,
        "err_ref": err_ref,
        "err_ours": err_ours,
        "err_ratio": err_ours / max(err_ref, FP32_UNIT_ROUNDOFF),
    }


def run_problem(pid: str, args, timer, compiled_cache: dict) -> dict:
    import torch

    device = torch.device(DEVICE)
    problem = importlib.import_module(f"kernels.problems.{pid}")
    route = importlib.import_module(f"kernels.triton.{pid}")
    ref, ours = make_models(problem, route, device, seed=1234)
    variants = [v for v in route.VARIANTS if not v.startswith("interpret")]
    rec: dict = {"id": pid, "kernelbench": problem.KERNELBENCH_NAME, "shape": problem.SHAPES[SHAPE]}
    rec["floor_bytes"] = problem.floor_bytes(SHAPE)
    rec["floor_ms"] = problem.H200_MS["floor"]
    rec["benchmark_md_ms"] = dict(problem.H200_MS)

    # correctness: ModelNew as shipped on two fresh draws, each variant on one more
    try:
        rec["checks"] = [check_once(problem, ref, ours, device, seed, None) for seed in (11, 12)]
    except Exception as e:  # the shipped version broke: say so, and still measure the variants
        rec["error"] = f"{type(e).__name__}: {e}"[:2000]
        rec["checks"] = [{"allclose": False, "inputs_unchanged": True, "err_ref": math.nan, "err_ours": math.inf,
                          "err_ratio": math.inf}]  # fmt: skip
        print(f"[{pid}] shipped version failed: {rec['error'][:500]}", flush=True)
    rec["variant_checks"] = {}
    for v in variants:
        try:
            rec["variant_checks"][v] = check_once(problem, ref, ours, device, 13, v)
        except Exception as e:  # a variant that fails to build or run is reported, not fatal
            rec["variant_checks"][v] = {"error": f"{type(e).__name__}: {e}"[:2000]}
    rec["passed"] = all(c["allclose"] and c["inputs_unchanged"] for c in rec["checks"])
    rec["err_ref"] = max(c["err_ref"] for c in rec["checks"])
    rec["err_ours"] = max(c["err_ours"] for c in rec["checks"])
    rec["err_ratio"] = max(c["err_ratio"] for c in rec["checks"])
    print(
        f"[{pid}] checked: passed={rec['passed']} err ours {rec['err_ours']:.3g} ref {rec['err_ref']:.3g}", flush=True
    )

    gen = torch.Generator(device=device).manual_seed(99)
    inputs = problem.get_inputs(SHAPE, device=device, generator=gen)
    with torch.no_grad():
        rec["eager_ms"], _ = timer.median_ms(lambda: ref(*inputs), args.runs)
        rec["eager_idle_ms"] = timer.idle_median_ms(lambda: ref(*inputs), args.runs)
        print(f"[{pid}] eager {rec['eager_ms']:.4f} ms, from idle {rec['eager_idle_ms']:.4f}", flush=True)
        if not args.no_compile:
            try:
                t0 = time.time()
                compiled = torch.compile(ref)
                compiled(*inputs)
                sync(device)
                rec["compile_seconds"] = time.time() - t0
                rec["compile_ms"], _ = timer.median_ms(lambda: compiled(*inputs), args.runs)
                rec["compile_idle_ms"] = timer.idle_median_ms(lambda: compiled(*inputs), args.runs)
                print(
                    f"[{pid}] compile {rec['compile_ms']:.4f} ms, from idle {rec['compile_idle_ms']:.4f} "
                    f"({rec['compile_seconds']:.0f} s)",
                    flush=True,
                )
                del compiled
            except Exception as e:
                rec["compile_error"] = f"{type(e).__name__}: {e}"[:2000]
                print(f"[{pid}] compile failed: {rec['compile_error'][:300]}", flush=True)
            torch._dynamo.reset()
        if "error" in rec:
            rec["ours_ms"], times = math.nan, [math.nan]
        else:
            rec["ours_ms"], times = timer.median_ms(lambda: ours(*inputs), args.runs)
            rec["ours_idle_ms"] = timer.idle_median_ms(lambda: ours(*inputs), args.runs)
        rec["ours_spread_ms"] = [min(times), max(times)]
        rec["variant_ms"] = {}
        for v in variants:
            if "error" in rec["variant_checks"].get(v, {}):
                continue
            ours.variant = v
            try:
                rec["variant_ms"][v], _ = timer.median_ms(lambda: ours(*inputs), args.variant_runs)
            except Exception as e:
                rec["variant_checks"][v]["timing_error"] = f"{type(e).__name__}: {e}"[:1000]
            finally:
                ours.variant = None
        # the shipped version once more, to see the run-to-run spread next to the variants' differences
        if "error" not in rec:
            rec["ours_ms_again"], _ = timer.median_ms(lambda: ours(*inputs), args.runs)
        rec["chosen_config"] = chosen_config(route)
    again = rec.get("ours_ms_again", math.nan)
    idle = rec.get("ours_idle_ms", math.nan)
    print(
        f"[{pid}] ours {rec['ours_ms']:.4f} ms (again {again:.4f}, from idle {idle:.4f}); variants {rec['variant_ms']}",
        flush=True,
    )
    derive(rec)
    return rec


def chosen_config(route) -> dict:
    """What the shipped version ran: the autotuner's picks where the route autotunes (its ``chosen_configs()``), else
    its fixed ``VARIANTS["default"]``."""
    if hasattr(route, "chosen_configs"):
        return {"autotuned": route.chosen_configs()}
    return {"fixed": route.VARIANTS["default"]}


def derive(rec: dict) -> None:
    rec["speedup_eager"] = rec["eager_ms"] / rec["ours_ms"]
    if "compile_ms" in rec:
        rec["speedup_compile"] = rec["compile_ms"] / rec["ours_ms"]
    if "ours_idle_ms" in rec:
        rec["idle_speedup_eager"] = rec["eager_idle_ms"] / rec["ours_idle_ms"]
        if "compile_idle_ms" in rec:
            rec["idle_speedup_compile"] = rec["compile_idle_ms"] / rec["ours_idle_ms"]
    rec["gb_per_s"] = rec["floor_bytes"] / rec["ours_ms"] / 1e6
    rec["fraction_of_floor"] = rec["floor_ms"] / rec["ours_ms"]
    rec["memory_bound"] = rec["id"] not in COMPUTE_BOUND


def copy_bandwidth(device) -> float:
    import torch

    n = (1 << 30) if device.type == "cuda" else (1 << 20)
    buffers = [torch.empty(n, dtype=torch.float32, device=device).uniform_(), torch.empty(n, device=device)]
    ms, _ = Timer(device).median_ms(lambda: buffers[1].copy_(buffers[0]), 20)
    buffers.clear()
    free_memory()
    return 2 * n * 4 / ms / 1e9  # TB/s, read + write


def environment(args) -> dict:
    import torch
    import triton

    on_gpu = torch.cuda.is_available() and DEVICE == "cuda"
    env = {
        "gpu": torch.cuda.get_device_name() if on_gpu else "cpu (Triton interpreter)",
        "sms": torch.cuda.get_device_properties(0).multi_processor_count if on_gpu else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "command": "python bench/kernels/run.py " + " ".join(sys.argv[1:]),
        "date_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "runs": args.runs,
        "variant_runs": args.variant_runs,
        "l2_flush_bytes": L2_FLUSH_BYTES,
    }
    try:
        env["driver"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        pass
    return env


def geomean(values) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def command_lines(data: dict) -> list[str]:
    by_command: dict[tuple[str, str], list[str]] = {}
    for pid in PROBLEM_IDS:
        env = data["problems"].get(pid, {}).get("environment")
        if env:
            by_command.setdefault((env["command"], env["date_utc"]), []).append(pid)
    return [f"- `{cmd}` ({date}): {', '.join(pids)}" for (cmd, date), pids in by_command.items()]


def render(data: dict) -> str:
    env = data["environment"]
    rows = [data["problems"][p] for p in PROBLEM_IDS if p in data["problems"]]
    lines = [
        "# The Triton route on the H200: results",
        "",
        f"GPU: {env['gpu']} ({env.get('sms')} SMs, driver {env.get('driver', '?')}); torch {env['torch']} "
        f"(CUDA {env['cuda']}), triton {env['triton']}, python {env['python']}. "
        f"Copy bandwidth measured in the run: {env.get('copy_tb_s', float('nan')):.2f} TB/s.",
        "",
        "Commands (in the repository root on the device machine), each with the problems it measured:",
        "",
        *command_lines(data),
        "",
        "Each time is the median of "
        f"{env['runs']} runs, each after a {env['l2_flush_bytes'] >> 20} MB L2 flush, timed with CUDA events; "
        "eager, torch.compile and ours measured in the same process, one problem after another.",
        "",
        "| problem | eager ms | compile ms | ours ms | vs eager | vs compile | GB/s | of floor | err ours | "
        "err ref | err ratio | checks |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        comp = f"{r['compile_ms']:.3f}" if "compile_ms" in r else "—"
        vs_comp = f"{r['speedup_compile']:.2f}×" if "speedup_compile" in r else "—"
        floor = f"{100 * r['fraction_of_floor']:.0f} %"
        lines.append(
            f"| {r['id']} | {r['eager_ms']:.3f} | {comp} | {r['ours_ms']:.3f} | {r['speedup_eager']:.2f}× | "
            f"{vs_comp} | {r['gb_per_s']:.0f} | {floor} | {r['err_ours']:.2e} | {r['err_ref']:.2e} | "
            f"{r['err_ratio']:.2f} | {'pass' if r['passed'] else 'FAIL'} |"
        )
    g_ours = geomean(r["speedup_eager"] for r in rows)
    g_comp = geomean(r["eager_ms"] / r["compile_ms"] for r in rows if "compile_ms" in r)
    g_floor = geomean(r["eager_ms"] / r["floor_ms"] for r in rows)
    lines += [
        "",
        f"Geometric mean speed-up over eager across {len(rows)} problems: **ours {g_ours:.2f}×**, "
        f"torch.compile {g_comp:.2f}×, the floor {g_floor:.2f}× (each from this run's eager times).",
        "",
        "- *floor*: the fewest bytes the problem must move (inputs once, output once) at the copy bandwidth of "
        "BENCHMARK.md (4.18 TB/s); for matmul three TF32 passes at the TF32 rate. *of floor* = floor ms / ours ms "
        "(a reduction can pass 100 %: reading alone runs faster than copying).",
        "- *GB/s*: the floor's bytes over our time (for matmul too, so there it is not a bandwidth).",
        "- *err*: ||out − oracle|| / ||oracle|| against a float64 oracle (the reference module run in float64 on "
        "the same inputs), the worse of two fresh draws; *err ratio* = err ours / max(err ref, 2^-24): an error "
        "under fp32 rounding counts as 2^-24, so a reference that lands exactly by luck does not inflate the ratio.",
        "- *checks*: our output within atol = rtol = 1e-2 of the fp32 reference, no NaN (the output memory is "
        "poisoned with NaN first), inputs left unchanged.",
        "",
        *idle_lines(rows),
        *chosen_lines(rows),
        "Variants (median ms; the shipped one is *ours*):",
        "",
    ]
    for r in rows:
        vs = ", ".join(f"{k} {v:.4f}" for k, v in sorted(r.get("variant_ms", {}).items(), key=lambda kv: kv[1]))
        bad = [k for k, c in r.get("variant_checks", {}).items() if "error" in c or not c.get("allclose", False)]
        lines.append(f"- {r['id']}: {vs}" + (f"; failed: {', '.join(bad)}" if bad else ""))
    return "\n".join(lines) + "\n"


def chosen_lines(rows: list[dict]) -> list[str]:
    """The configuration each problem's shipped version ran at its shape: fixed, or the autotuner's pick."""
    rows = [r for r in rows if "chosen_config" in r]
    if not rows:
        return []
    lines = ["Chosen config per shape (what *ours* ran):", "", "| problem | shape | config |", "|---|---|---|"]
    for r in rows:
        shape = " × ".join(str(v) for v in r["shape"].values())
        lines.append(f"| {r['id']} | {shape} | `{json.dumps(r['chosen_config'], sort_keys=True)}` |")
    return lines + [""]


def idle_lines(rows: list[dict]) -> list[str]:
    """The same calls timed from an idle GPU, the verifier's way (launch cost inside), beside the busy-GPU times."""
    rows = [r for r in rows if "ours_idle_ms" in r]
    if not rows:
        return []
    lines = [
        "Timed from an idle GPU, as the verifier times (synchronize, flush, synchronize, event, call, event: the "
        "call's host work is inside the time), in the same run, median of the same number of runs:",
        "",
        "| problem | eager idle ms | compile idle ms | ours idle ms | ours busy ms | launch cost ms | vs eager (idle) "
        "| vs compile (idle) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        comp = f"{r['compile_idle_ms']:.3f}" if "compile_idle_ms" in r else "—"
        vs_comp = f"{r['idle_speedup_compile']:.2f}×" if "idle_speedup_compile" in r else "—"
        lines.append(
            f"| {r['id']} | {r['eager_idle_ms']:.3f} | {comp} | {r['ours_idle_ms']:.3f} | {r['ours_ms']:.3f} | "
            f"{r['ours_idle_ms'] - r['ours_ms']:.3f} | {r['idle_speedup_eager']:.2f}× | {vs_comp} |"
        )
    g_idle = geomean(r["idle_speedup_eager"] for r in rows)
    g_comp = geomean(r["eager_idle_ms"] / r["compile_idle_ms"] for r in rows if "compile_idle_ms" in r)
    lines += [
        "",
        f"Geometric mean speed-up over eager, both timed from idle, across {len(rows)} problems: **ours {g_idle:.2f}×**"
        f", torch.compile {g_comp:.2f}× (the verifier's score is the same geometric mean, from the harness's own run).",
        "",
    ]
    return lines


def chart(data: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [data["problems"][p] for p in PROBLEM_IDS if p in data["problems"]]
    names = [r["id"] for r in rows]
    x = range(len(rows))
    fig, ax = plt.subplots(figsize=(12, 5))
    w = 0.38
    ax.bar([i - w / 2 for i in x], [r["speedup_eager"] for r in rows], w, label="ours (Triton)")
    ax.bar(
        [i + w / 2 for i in x], [r["eager_ms"] / r["compile_ms"] if "compile_ms" in r else 0 for r in rows], w,
        label="torch.compile",
    )  # fmt: skip
    ax.scatter(
        list(x), [r["eager_ms"] / r["floor_ms"] for r in rows], marker="_", s=600, c="k", label="floor", zorder=3
    )
    ax.set_yscale("log")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xticks(list(x), names, rotation=30, ha="right")
    ax.set_ylabel("speed-up over PyTorch eager (log)")
    ax.set_title(f"Triton route on {data['environment']['gpu']}: speed-up per problem beside the floor")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", choices=PROBLEM_IDS, help="problems to run (default: all 12)")
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="folder for h200.json, RESULTS.md, speedup.png")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--variant-runs", type=int, default=30)
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    ap.add_argument("--merge", help="a previous h200.json: its problems are kept unless run again here")
    ap.add_argument("--render", help="only re-render RESULTS.md (and the chart, if matplotlib is there) from a JSON")
    ap.add_argument("--shape", choices=("full", "smoke"), default="full", help="smoke: a local dry run only")
    ap.add_argument("--device", default="cuda", help="cpu: a local dry run under TRITON_INTERPRET=1 only")
    args = ap.parse_args()
    global SHAPE, DEVICE
    SHAPE, DEVICE = args.shape, args.device
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    if args.render:
        data = json.loads(Path(args.render).read_text())
        (out / "RESULTS.md").write_text(render(data))
        try:
            chart(data, out / "speedup.png")
        except ImportError:
            print("matplotlib missing: no chart")
        return 0

    import torch

    data = {"problems": {}}
    if args.merge and Path(args.merge).exists():
        data = json.loads(Path(args.merge).read_text())
    device = torch.device(DEVICE)
    env = environment(args)
    env["copy_tb_s"] = copy_bandwidth(device)
    print(f"{env['gpu']} torch {env['torch']} triton {env['triton']} copy {env['copy_tb_s']:.2f} TB/s", flush=True)
    data["environment"] = env
    timer = Timer(device)
    wanted = [p for p in RUN_ORDER if not args.only or p in args.only]
    for pid in wanted:
        t0 = time.time()
        try:
            rec = run_problem(pid, args, timer, {})
            rec["environment"] = env
            data["problems"][pid] = rec
        except Exception:
            print(f"[{pid}] FAILED\n{traceback.format_exc()}", flush=True)
            data.setdefault("failures", {})[pid] = traceback.format_exc()[-3000:]
        print(f"[{pid}] {time.time() - t0:.0f} s", flush=True)
        (out / "h200.json").write_text(json.dumps(data, indent=1, default=str))
        free_memory()
    (out / "RESULTS.md").write_text(render(data))
    try:
        chart(data, out / "speedup.png")
    except Exception as e:
        print(f"chart failed: {e}")
    print()
    print(f"{'problem':22s} {'eager':>8s} {'compile':>8s} {'ours':>8s} {'xEager':>7s} {'xComp':>6s} {'floor%':>6s} "
          f"{'errRatio':>8s} ok  best-variant")  # fmt: skip
    for pid in RUN_ORDER:
        r = data["problems"].get(pid)
        if not r:
            print(f"{pid:22s} missing")
            continue
        best = min(r["variant_ms"].items(), key=lambda kv: kv[1]) if r.get("variant_ms") else ("-", float("nan"))
        print(
            f"{pid:22s} {r['eager_ms']:8.3f} {r.get('compile_ms', float('nan')):8.3f} {r['ours_ms']:8.3f} "
            f"{r['speedup_eager']:7.2f} {r.get('speedup_compile', float('nan')):6.2f} "
            f"{100 * r['fraction_of_floor']:6.0f} {r['err_ratio']:8.2f} {'y' if r['passed'] else 'N'}   "
            f"{best[0]} {best[1]:.3f}"
        )
    rows = [data["problems"][p] for p in PROBLEM_IDS if p in data["problems"]]
    print(f"geomean vs eager: {geomean(r['speedup_eager'] for r in rows):.3f} over {len(rows)} problems")
    idle = [r for r in rows if "idle_speedup_eager" in r]
    for r in idle:
        print(
            f"{r['id']:22s} idle: eager {r['eager_idle_ms']:8.3f} compile {r.get('compile_idle_ms', math.nan):8.3f} "
            f"ours {r['ours_idle_ms']:8.3f} x{r['idle_speedup_eager']:.2f}"
        )
    print(f"geomean vs eager from idle (the verifier's way): {geomean(r['idle_speedup_eager'] for r in idle):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
