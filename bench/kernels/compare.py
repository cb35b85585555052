"""Time torch.compile and launch variants of one problem in alternating rounds, to see the round-to-round spread
next to the differences between them (run.py times each once, one after another).

Usage on the device machine:
    python bench/kernels/compare.py new_gelu --variants default stream_b2048_w4 --rounds 10 --runs 50 --out $OUT
Each round times torch.compile, eager (with --eager) and every variant (the median of --runs runs, each after the
256 MB L2 flush of run.py); the report gives each one's median over rounds and its range, and writes
$OUT/compare_<problem>.json.
"""

import argparse
import importlib
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import run as bench  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problem", choices=bench.PROBLEM_IDS)
    ap.add_argument("--variants", nargs="+", default=["default"])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--eager", action="store_true", help="time eager too")
    ap.add_argument("--out", default=".")
    args = ap.parse_args()

    import torch

    device = torch.device("cuda")
    problem = importlib.import_module(f"kernels.problems.{args.problem}")
    route = importlib.import_module(f"kernels.triton.{args.problem}")
    ref, ours = bench.make_models(problem, route, device, seed=1234)
    inputs = problem.get_inputs("full", device=device, generator=torch.Generator(device=device).manual_seed(99))
    timer = bench.Timer(device)
    compiled = torch.compile(ref)

    def ours_as(variant):
        def call():
            ours.variant = None if variant == "default" else variant
            return ours(*inputs)

        return call

    contenders = {"compile": lambda: compiled(*inputs)}
    if args.eager:
        contenders["eager"] = lambda: ref(*inputs)
    contenders.update({v: ours_as(v) for v in args.variants})
    with torch.no_grad():
        expected = ref(*inputs)
        for name, fn in contenders.items():  # every contender computes the same thing before it is timed
            report = bench.allclose_report(fn(), expected)
            if not report["allclose"]:
                raise SystemExit(f"{name} differs from the reference: {report}")
        rounds = {name: [] for name in contenders}
        for _ in range(args.rounds):
            for name, fn in contenders.items():
                rounds[name].append(timer.median_ms(fn, args.runs)[0])
    result = {
        "problem": args.problem,
        "command": "python bench/kernels/compare.py " + " ".join(sys.argv[1:]),
        "gpu": torch.cuda.get_device_name(),
        "rounds": rounds,
    }
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / f"compare_{args.problem}.json").write_text(json.dumps(result, indent=1))
    base = statistics.median(rounds["compile"])
    print(f"{args.problem}: {args.rounds} rounds x {args.runs} runs; median of round medians [min, max] ms")
    for name, times in rounds.items():
        med = statistics.median(times)
        wins = sum(t < c for t, c in zip(times, rounds["compile"], strict=True))
        print(
            f"  {name:28s} {med:.4f} [{min(times):.4f}, {max(times):.4f}]  compile/this {base / med:.3f}  "
            f"faster than compile in {wins}/{args.rounds} rounds"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
