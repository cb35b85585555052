"""minGPT's tanh GELU in one elementwise Triton pass.

0.5 * x * (1 + tanh(u)) equals x * sigmoid(2u) exactly, so the kernel computes x / (1 + exp(-2u)): one exp instead of
a tanh, and no cancellation in 1 + tanh(u) for negative x (more accurate than the reference there).

On a GPU the block size is autotuned per size (the first call times each config): the tuned versions were within
2 % of each other and of torch.compile, so the choice is left to the card at hand; later calls of that size launch
the chosen compiled kernel directly (see _TUNED). Under the CPU interpreter, where
autotuning several configs does not work, one fixed config runs. Streaming hints (evict_first loads, .cs stores)
and a persistent grid were measured 5-20 % slower on the H200 and are kept as variants only.
"""

import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

try:
    from .launch import make_plan, num_sms, run_plan  # imported as kernels.triton.<problem>
except ImportError:  # loaded as a file by the harness, with the route directory on sys.path
    from launch import make_plan, num_sms, run_plan

_INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
_SQRT_2_OVER_PI = tl.constexpr(0.7978845608028654)
_INT32_MAX = 2**31 - 1

# name -> launch parameters; the bench times each. ModelNew runs "default" (autotuned on a GPU, "interpret" on CPU).
VARIANTS = {
    "default": {"autotune": True},
    "b512_w4": {"BLOCK": 512, "num_warps": 4},
    "b512_w2": {"BLOCK": 512, "num_warps": 2},
    "b1024_w2": {"BLOCK": 1024, "num_warps": 2},
    "b1024_w4": {"BLOCK": 1024, "num_warps": 4},
    "b2048_w4": {"BLOCK": 2048, "num_warps": 4},
    "b4096_w8": {"BLOCK": 4096, "num_warps": 8},
    "b8192_w8": {"BLOCK": 8192, "num_warps": 8},
    "stream_b1024_w4": {"BLOCK": 1024, "num_warps": 4, "stream": True},
    "persist_b1024_w4_p16": {"BLOCK": 1024, "num_warps": 4, "stream": True, "programs_per_sm": 16},
    "interpret": {"BLOCK": 256, "num_warps": 4},
    "interpret_persist": {"BLOCK": 64, "num_warps": 4, "stream": True, "programs_per_sm": 3},
}


@triton.jit
def _gelu_tile(x_ptr, y_ptr, offs, n, STREAM: tl.constexpr):
    mask = offs < n
    # STREAM: each byte is touched once, so neither the input nor the output should take L2 space from the other
    x = tl.load(x_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first" if STREAM else "")
    u = _SQRT_2_OVER_PI * (x + 0.044715 * (x * x * x))
    tl.store(y_ptr + offs, x / (1.0 + tl.exp(-2.0 * u)), mask=mask, cache_modifier=".cs" if STREAM else "")


@triton.jit
def _gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, WIDE: tl.constexpr, STREAM: tl.constexpr = False):
    pid = tl.program_id(0)
    if WIDE:  # 64-bit offsets only where the tensor needs them; 32-bit ones cost fewer instructions
        pid = pid.to(tl.int64)
    _gelu_tile(x_ptr, y_ptr, pid * BLOCK + tl.arange(0, BLOCK), n, STREAM)


@triton.jit
def _gelu_persistent(x_ptr, y_ptr, n, BLOCK: tl.constexpr, WIDE: tl.constexpr, STREAM: tl.constexpr):
    # a fixed grid walking the tiles: no per-tile block launch, the next tile's loads issued by a live program
    tiles = tl.cdiv(n, BLOCK)
    for tile in range(tl.program_id(0), tiles, tl.num_programs(0)):
        if WIDE:
            start = tile.to(tl.int64) * BLOCK
        else:
            start = tile * BLOCK
        _gelu_tile(x_ptr, y_ptr, start + tl.arange(0, BLOCK), n, STREAM)


_gelu_autotuned = triton.autotune(
    configs=[
        triton.Config({"BLOCK": cfg["BLOCK"]}, num_warps=cfg["num_warps"])
        for name, cfg in VARIANTS.items()
        if name.startswith("b")
    ],
    key=["n", "WIDE"],
)(_gelu_kernel)


# (device, size, input 16-byte aligned) -> the launch plan (launch.make_plan) of the compiled kernel the autotuner
# chose. Triton's JIT launcher binds, specialises and looks up its arguments on every call (~20 us of host time, and
# the autotuner's wrapper ~10 us more: bench/kernels/launch_overhead.py), which counts when each call is timed from an
# idle GPU, as the verifier does; the compiled kernel is launched directly instead. The key holds what Triton
# specialises the kernel on (the size and the pointers' alignment; the output is a fresh allocation, always aligned),
# so a cached kernel is only reused where the JIT launcher would pick the same one.
_TUNED: dict = {}


def _launch_tuned(x: torch.Tensor, y: torch.Tensor, n: int) -> None:
    device = x.get_device()
    current = device == torch.cuda.current_device()  # a plan holds the kernel compiled for the current device
    key = (device, n, x.data_ptr() & 15 == 0)
    plan = _TUNED.get(key)
    if plan is not None and current:
        run_plan(plan, device, (x, y, n))
        return
    wide = n + 8192 > _INT32_MAX
    _gelu_autotuned[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n, WIDE=wide)  # times the configs once
    if not current:
        return
    best = _gelu_autotuned.best_config
    block = best.kwargs["BLOCK"]
    grid = (triton.cdiv(n, block),)
    # the chosen config through the ordinary launch once more (same output), to get hold of its compiled kernel
    compiled = _gelu_kernel[grid](x, y, n, BLOCK=block, WIDE=wide, STREAM=False, num_warps=best.num_warps)
    _TUNED[key] = make_plan(compiled, grid, (block, wide, False))


def chosen_configs() -> dict:
    """The autotuner's pick per key it has tuned (the size and WIDE, then Triton's own key parts), as the bench
    records it beside each run (kernels/RESULTS.md: the chosen config per shape)."""
    return {
        repr(key): {"BLOCK": cfg.kwargs["BLOCK"], "num_warps": cfg.num_warps}
        for key, cfg in getattr(_gelu_autotuned, "cache", {}).items()
    }


def new_gelu(x: torch.Tensor, variant: str | None = None) -> torch.Tensor:
    x = x.contiguous()
    y = torch.empty_like(x)
    if variant is None and not _INTERPRET:  # the shipped path, the one the verifier times: the least host work
        _launch_tuned(x, y, x.numel())
        return y
    cfg = VARIANTS[variant or ("interpret" if _INTERPRET else "default")]
    n = x.numel()
    wide = n + 8192 > _INT32_MAX
    if cfg.get("autotune"):
        _launch_tuned(x, y, n)
    elif "programs_per_sm" in cfg:
        grid = (max(1, min(triton.cdiv(n, cfg["BLOCK"]), num_sms(x.device) * cfg["programs_per_sm"])),)
        _gelu_persistent[grid](x, y, n, BLOCK=cfg["BLOCK"], WIDE=wide, STREAM=True, num_warps=cfg["num_warps"])
    else:
        grid = (triton.cdiv(n, cfg["BLOCK"]),)
        _gelu_kernel[grid](
            x, y, n, BLOCK=cfg["BLOCK"], WIDE=wide, STREAM=cfg.get("stream", False), num_warps=cfg["num_warps"]
        )
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.variant: str | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return new_gelu(x, self.variant)
