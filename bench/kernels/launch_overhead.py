"""Host time per call of the sub-millisecond routes, and how the verifier sees it.

The verifier (services/verifier/harness/device.py) times every call from an idle GPU: synchronize, flush L2,
synchronize, CUDA event, the call, CUDA event. The host work of the call (Python, Triton's launcher, allocations)
then sits inside the measured time. This script reports, per problem:
- idle ms: the median of --runs calls timed that way (eager, torch.compile, ours and the named variants);
- host us: the host time per call of ours on a tiny input (GPU work negligible), over 2000 calls;
- with --baseline DIR (the route's files of an earlier revision), the same for that route, loaded the harness's way
  (as files, DIR on sys.path), its host time measured in rounds alternating with ours: before/after on one machine;
- for new_gelu, the host time of the pieces: torch.empty_like, a plain jit launch, the compiled kernel launched
  directly, and kernels/triton/launch.py's cached launch of the same kernel.

Usage on the device machine (the baseline folder must be untracked but not ignored, to travel with the tree):
  rm -rf bench_baseline && mkdir -p bench_baseline && git archive d0a7ec4 kernels/triton | tar -x -C bench_baseline
  python bench/kernels/launch_overhead.py --baseline bench_baseline/kernels/triton --out $OUT
"""

import argparse
import importlib
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import run as bench  # noqa: E402

PROBLEMS = ("new_gelu", "cross_entropy", "layer_norm", "kl_div", "triplet_margin_loss", "hinge_loss")


def host_us(fn, calls: int = 2000) -> float:
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def load_baseline(route_dir: Path, pid: str):
    """An earlier route's <pid>.py, loaded as the harness loads a route: as a file, its folder on sys.path (where its
    ``from launch import ...`` finds that revision's launch.py)."""
    if str(route_dir) not in sys.path:
        sys.path.insert(0, str(route_dir))
    spec = importlib.util.spec_from_file_location(f"baseline_{pid}", route_dir / f"{pid}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measure(pid: str, device, timer, runs: int, baseline_dir: Path | None) -> dict:
    problem = importlib.import_module(f"kernels.problems.{pid}")
    routes = {"ours": importlib.import_module(f"kernels.triton.{pid}")}
    if baseline_dir is not None:
        routes["baseline"] = load_baseline(baseline_dir, pid)
    models = {name: bench.make_models(problem, route, device, seed=1234) for name, route in routes.items()}
    ref = models["ours"][0]
    inputs = problem.get_inputs("full", device=device, generator=torch.Generator(device=device).manual_seed(9))
    compiled = torch.compile(ref)
    compiled(*inputs)
    rec = {
        "eager idle ms": timer.idle_median_ms(lambda: ref(*inputs), runs),
        "compile idle ms": timer.idle_median_ms(lambda: compiled(*inputs), runs),
    }
    for name, (_, model) in models.items():
        model(*inputs)  # first call: compiles, autotunes
        rec[f"{name} idle ms"] = timer.idle_median_ms(lambda model=model: model(*inputs), runs)
    rec["ours event ms (busy GPU)"] = timer.median_ms(lambda: models["ours"][1](*inputs), runs)[0]
    bench.SHAPE = "smoke"
    small = {name: bench.make_models(problem, route, device, seed=1234)[1] for name, route in routes.items()}
    bench.SHAPE = "full"
    smoke = problem.get_inputs("smoke", device=device, generator=torch.Generator(device=device).manual_seed(9))
    rounds: dict = {name: [] for name in small}
    for _ in range(5):  # alternating rounds: a drift of the host's speed falls on both routes alike
        for name, model in small.items():
            rounds[name].append(host_us(lambda model=model: model(*smoke)))
    for name, values in rounds.items():
        rec[f"{name} host us (smoke shape)"] = statistics.median(values)
    torch._dynamo.reset()
    return rec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=".")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--baseline", type=Path, default=None, help="an earlier revision's kernels/triton folder")
    args = ap.parse_args()
    baseline_dir = args.baseline.resolve() if args.baseline else None
    device = torch.device("cuda")
    timer = bench.Timer(device)  # run.py's timers: the verifier's idle-GPU way and the busy one
    results = {}
    with torch.no_grad():
        for pid in PROBLEMS:
            results[pid] = measure(pid, device, timer, args.runs, baseline_dir)
            print(pid, {k: round(v, 4) for k, v in results[pid].items()}, flush=True)
            bench.free_memory()

        gelu = importlib.import_module("kernels.triton.new_gelu")
        launcher = importlib.import_module("kernels.triton.launch")
        x = torch.randn(1024, device=device)
        y = torch.empty_like(x)
        pieces = {
            "torch.empty_like": lambda: torch.empty_like(x),
            "new_gelu default (autotuned)": lambda: gelu.new_gelu(x),
            "new_gelu b1024_w4 (plain jit launch)": lambda: gelu.new_gelu(x, "b1024_w4"),
            "jit launch alone": lambda: gelu._gelu_kernel[(1,)](x, y, 1024, BLOCK=1024, WIDE=False, num_warps=4),
            "launch.py cached launch": lambda: launcher.launch(
                gelu._gelu_kernel, (1,), x, y, 1024, BLOCK=1024, WIDE=False, num_warps=4
            ),
        }
        kernel = gelu._gelu_kernel[(1,)](x, y, 1024, BLOCK=1024, WIDE=False, num_warps=4)
        try:
            from triton import knobs

            stream = torch.cuda.current_stream().cuda_stream
            bound = (x, y, 1024, 1024, False, False)
            meta = kernel.launch_metadata((1, 1, 1), stream, *bound)

            def direct():
                kernel.run(1, 1, 1, stream, kernel.function, kernel.packed_metadata, meta,
                           knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook, *bound)  # fmt: skip

            direct()
            torch.cuda.synchronize()
            pieces["compiled kernel launched directly"] = direct
        except Exception as e:  # the launcher's internals differ between Triton versions
            results["direct launch error"] = f"{type(e).__name__}: {e}"
            print(results["direct launch error"])
        results["new_gelu host us"] = {name: host_us(fn) for name, fn in pieces.items()}
        print(results["new_gelu host us"])
    out = {"command": "python bench/kernels/launch_overhead.py " + " ".join(sys.argv[1:]), "triton": triton.__version__}
    out["results"] = results
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "launch_overhead.json").write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
