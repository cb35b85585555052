"""What bounds layer_norm (16 rows of 4M floats) when each row is held in registers by one cooperative launch
(kernels/triton/layer_norm.py, `_hold_layer_norm`): the parts of that kernel timed alone, at the full shape.

- copy: each program loads its slice of every row into registers and stores it back (no meeting, no parameters):
  the HBM traffic of the ideal single pass, in the same access pattern;
- meetings: the 16 per-row meetings of all programs, with no data;
- params from L2: each program re-reads its weight and bias slice once per row (32 MB a row, 512 MB in all),
  the L2 traffic the held kernel adds because weight and bias cannot stay on chip;
- no params: the held kernel without weight and bias (x normalised only): copy + meetings + the row statistics;
- full: the shipped `hold` variant.

Usage on the device machine:  python bench/kernels/layer_norm_bound.py [--out $OUT]
"""

import argparse
import json
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import run as bench  # noqa: E402

from kernels.triton import layer_norm as ln  # noqa: E402


@triton.jit
def _copy(x_ptr, y_ptr, rows, cols, SLICE: tl.constexpr):
    c = tl.program_id(0) * SLICE + tl.arange(0, SLICE)
    mask = c < cols
    for row in range(rows):
        ptrs = tl.cast(row, tl.int64) * cols + c
        x = tl.load(x_ptr + ptrs, mask=mask, eviction_policy="evict_first")
        tl.store(y_ptr + ptrs, x, mask=mask, cache_modifier=".cs")


@triton.jit
def _meetings(arrived_ptr, rows):
    for row in range(rows):
        ln._meet(arrived_ptr + row, tl.num_programs(0))


@triton.jit
def _params(w_ptr, b_ptr, out_ptr, rows, cols, zero, SLICE: tl.constexpr):
    c = tl.program_id(0) * SLICE + tl.arange(0, SLICE)
    mask = c < cols
    acc = tl.zeros([SLICE], dtype=tl.float32)
    for row in range(rows):
        shift = row * zero  # 0 at run time, but the compiler cannot hoist the loads out of the loop
        w = tl.load(w_ptr + shift + c, mask=mask, eviction_policy="evict_last")
        b = tl.load(b_ptr + shift + c, mask=mask, eviction_policy="evict_last")
        acc = acc * w + b
    tl.store(out_ptr + tl.program_id(0), tl.sum(acc, axis=0))


@triton.jit
def _no_params(x_ptr, y_ptr, mean_ptr, m2_ptr, arrived_ptr, rows, cols, SLICE: tl.constexpr, BLOCK_P: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    c = pid * SLICE + tl.arange(0, SLICE)
    mask = c < cols
    n = tl.minimum(cols - pid * SLICE, SLICE).to(tl.float32)
    for row in range(rows):
        row_start = tl.cast(row, tl.int64) * cols
        x = tl.load(x_ptr + row_start + c, mask=mask, other=0.0, eviction_policy="evict_first")
        part_mean = tl.sum(x, axis=0) / n
        dev = tl.where(mask, x - part_mean, 0.0)
        tl.store(mean_ptr + row * nprog + pid, part_mean)
        tl.store(m2_ptr + row * nprog + pid, tl.sum(dev * dev, axis=0))
        ln._meet(arrived_ptr + row, nprog)
        mean, rstd = ln._row_mean_rstd(mean_ptr + row * nprog, m2_ptr + row * nprog, nprog, cols, 1e-5, SLICE, BLOCK_P)
        tl.store(y_ptr + row_start + c, (x - mean) * rstd, mask=mask, cache_modifier=".cs")


ROWS, COLS = 16, 64 * 256 * 256


def measure(timer, x, y, w, b, slice_len: int, warps: int, per_sm: int, runs: int) -> dict:
    device = x.device
    programs = triton.cdiv(COLS, slice_len)
    launch = {"num_warps": warps, "maxnreg": 65536 // (32 * warps * per_sm), "launch_cooperative_grid": True}
    arrived = torch.zeros(ROWS, device=device, dtype=torch.int32)
    stats = [torch.empty(ROWS * programs, device=device) for _ in range(2)]
    part = torch.empty(programs, device=device)
    block_p = triton.next_power_of_2(programs)

    def meetings():
        arrived.zero_()
        _meetings[(programs,)](arrived, ROWS, **launch)

    def no_params():
        arrived.zero_()
        _no_params[(programs,)](x, y, *stats, arrived, ROWS, COLS, SLICE=slice_len, BLOCK_P=block_p, **launch)

    cases = {
        "copy": lambda: _copy[(programs,)](x, y, ROWS, COLS, SLICE=slice_len, **launch),
        "meetings": meetings,
        "params from L2": lambda: _params[(programs,)](w, b, part, ROWS, COLS, 0, SLICE=slice_len, **launch),
        "no params": no_params,
        # arrived.zero_() is inside two of the timed calls: its time, to take out
        "zeroing the counters": arrived.zero_,
    }
    return {name: timer.median_ms(fn, runs)[0] for name, fn in cases.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=".")
    ap.add_argument("--runs", type=int, default=50)
    args = ap.parse_args()
    device = torch.device("cuda")
    rows, cols = ROWS, COLS
    x = torch.randn(rows, cols, device=device)
    y = torch.empty_like(x)
    w, b = torch.randn(cols, device=device), torch.randn(cols, device=device)
    timer = bench.Timer(device)
    results = {}
    for slice_len, warps, per_sm in ((16384, 8, 2), (32768, 32, 1)):
        key = f"{triton.cdiv(cols, slice_len)} programs x {slice_len} ({warps} warps, {per_sm}/SM)"
        results[key] = measure(timer, x, y, w, b, slice_len, warps, per_sm, args.runs)
    model = ln.ModelNew((64, 256, 256)).to(device)
    with torch.no_grad():
        for variant in ("default", "hold_s16384_w8_p2", "hold_s16384_w8_p2_pf"):
            model.variant = None if variant == "default" else variant
            results[f"layer_norm {variant}"] = timer.median_ms(lambda: model(x.view(rows, 64, 256, 256)), args.runs)[0]
    out = {"command": "python bench/kernels/layer_norm_bound.py " + " ".join(sys.argv[1:]), "ms": results}
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "layer_norm_bound.json").write_text(json.dumps(out, indent=1))
    for key, value in results.items():
        if isinstance(value, dict):
            print(key)
            for name, ms in value.items():
                print(f"  {name:26s} {ms:.4f} ms")
        else:
            print(f"{key:40s} {value:.4f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
