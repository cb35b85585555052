"""Sum over one dim, keeping it: ``torch.sum(x, dim=dim, keepdim=True)``.

The tensor is viewed as (outer, reduced, inner). Each program owns BLOCK_C contiguous inner positions of one outer
index and walks the reduced dim in [BLOCK_R, BLOCK_C] tiles, accumulating a tile of partial sums (BLOCK_R independent
sums per column, which is also more accurate than one running sum) that it folds at the end, in float64. One read of
the input, one write of the output, no second pass.
"""

import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

try:
    from .launch import cdiv, launch  # imported as kernels.triton.<problem>
except ImportError:  # loaded as a file by the harness, with the route directory on sys.path
    from launch import cdiv, launch

_INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"

VARIANTS = {
    "default": {"BLOCK_R": 128, "BLOCK_C": 64, "num_warps": 4},
    "r64_c64_w4": {"BLOCK_R": 64, "BLOCK_C": 64, "num_warps": 4},
    "r256_c64_w8": {"BLOCK_R": 256, "BLOCK_C": 64, "num_warps": 8},
    "r128_c32_w4": {"BLOCK_R": 128, "BLOCK_C": 32, "num_warps": 4},
    "r32_c128_w8": {"BLOCK_R": 32, "BLOCK_C": 128, "num_warps": 8},
    "interpret": {"BLOCK_R": 8, "BLOCK_C": 16, "num_warps": 4},
}


@triton.jit
def _sum_dim_kernel(x_ptr, y_ptr, reduced, inner, col_blocks, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    pid = tl.program_id(0)
    outer = pid // col_blocks
    c = (pid % col_blocks) * BLOCK_C + tl.arange(0, BLOCK_C)
    c_mask = c < inner
    base = outer.to(tl.int64) * reduced * inner
    r = tl.arange(0, BLOCK_R)
    acc = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.float32)
    for r0 in range(0, reduced, BLOCK_R):
        rows = (r0 + r).to(tl.int64)
        mask = (rows < reduced)[:, None] & c_mask[None, :]
        acc += tl.load(x_ptr + base + rows[:, None] * inner + c[None, :], mask=mask, other=0.0)
    # the BLOCK_R partial sums of each column folded in float64 (once a program: no cost against the tiles' loads);
    # an fp32 fold's rounding was most of the error, 1.4x the reference's (kernels/RESULTS.md)
    tl.store(y_ptr + outer.to(tl.int64) * inner + c, tl.sum(acc.to(tl.float64), axis=0).to(tl.float32), mask=c_mask)


def sum_dim(x: torch.Tensor, dim: int, variant: str | None = None) -> torch.Tensor:
    dim = dim % x.dim()
    x = x.contiguous()
    out_shape = list(x.shape)
    out_shape[dim] = 1
    y = torch.empty(out_shape, device=x.device, dtype=x.dtype)
    reduced = x.shape[dim]
    inner = x[(0,) * (dim + 1)].numel() if dim + 1 < x.dim() else 1
    outer = x.numel() // max(1, reduced * inner) if reduced else y.numel() // inner
    cfg = VARIANTS[variant or ("interpret" if _INTERPRET else "default")]
    col_blocks = cdiv(inner, cfg["BLOCK_C"])
    launch(
        _sum_dim_kernel,
        (outer * col_blocks,),
        x,
        y,
        reduced,
        inner,
        col_blocks,
        BLOCK_R=cfg["BLOCK_R"],
        BLOCK_C=cfg["BLOCK_C"],
        num_warps=cfg["num_warps"],
    )
    return y


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim
        self.variant: str | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sum_dim(x, self.dim, self.variant)
