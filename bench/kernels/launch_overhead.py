"""Host time per call of the sub-millisecond routes, and how the verifier sees it.

The verifier (services/verifier/harness/device.py) times every call from an idle GPU: synchronize, flush L2,
synchronize, CUDA event, the call, CUDA event. The host work of the call (Python, Triton's launcher, allocations)
then sits inside the measured time. This script reports, per problem:
- idle ms: the median of --runs calls timed that way (eager, torch.compile, ours and the named variants);
- host us: the host time per call of ours on a tiny input (GPU work negligible), over 2000 calls;
- for new_gelu, the host time of the pieces: torch.empty_like, a plain jit launch, and the compiled kernel launched
  directly (what a launcher cached per shape could save).

Usage on the device machine:  python bench/kernels/launch_overhead.py [--out $OUT]
"""

import argparse
import importlib
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


def idle_ms(fn, flush, runs: int) -> float:
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    for i in range(runs):
        torch.cuda.synchronize()
        flush.fill_(1.0)
        torch.cuda.synchronize()
        starts[i].record()
        fn()
        ends[i].record()
        torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True))


def host_us(fn, calls: int = 2000) -> float:
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def measure(pid: str, device, flush, runs: int) -> dict:
    problem = importlib.import_module(f"kernels.problems.{pid}")
    route = importlib.import_module(f"kernels.triton.{pid}")
    ref, ours = bench.make_models(problem, route, device, seed=1234)
    inputs = problem.get_inputs("full", device=device, generator=torch.Generator(device=device).manual_seed(9))
    compiled = torch.compile(ref)
    compiled(*inputs)
    rec = {
        "eager idle ms": idle_ms(lambda: ref(*inputs), flush, runs),
        "compile idle ms": idle_ms(lambda: compiled(*inputs), flush, runs),
        "ours idle ms": idle_ms(lambda: ours(*inputs), flush, runs),
        "ours event ms (busy GPU)": bench.Timer(device).median_ms(lambda: ours(*inputs), runs)[0],
    }
    bench.SHAPE = "smoke"
    _, small = bench.make_models(problem, route, device, seed=1234)
    bench.SHAPE = "full"
    smoke = problem.get_inputs("smoke", device=device, generator=torch.Generator(device=device).manual_seed(9))
    rec["ours host us (smoke shape)"] = host_us(lambda: small(*smoke))
    torch._dynamo.reset()
    return rec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=".")
    ap.add_argument("--runs", type=int, default=50)
    args = ap.parse_args()
    device = torch.device("cuda")
    flush = torch.empty(bench.L2_FLUSH_BYTES // 4, device=device)
    results = {}
    with torch.no_grad():
        for pid in PROBLEMS:
            results[pid] = measure(pid, device, flush, args.runs)
            print(pid, {k: round(v, 4) for k, v in results[pid].items()}, flush=True)
            bench.free_memory()

        gelu = importlib.import_module("kernels.triton.new_gelu")
        x = torch.randn(1024, device=device)
        y = torch.empty_like(x)
        pieces = {
            "torch.empty_like": lambda: torch.empty_like(x),
            "new_gelu default (autotuned)": lambda: gelu.new_gelu(x),
            "new_gelu b1024_w4 (plain jit launch)": lambda: gelu.new_gelu(x, "b1024_w4"),
            "jit launch alone": lambda: gelu._gelu_kernel[(1,)](x, y, 1024, BLOCK=1024, WIDE=False, num_warps=4),
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
