"""Reverse cumulative sum along one dim: ``torch.cumsum(x.flip(dim), dim).flip(dim)``, i.e. out[i] = sum_{j>=i} x[j].

The tensor is viewed as (outer, length, inner); one program scans one line, walking it from its end in tiles: each
tile gets a reverse in-tile scan (``tl.cumsum(..., reverse=True)``) plus the carry of everything after it. One read,
one write; the flips cost nothing, they are index arithmetic.
"""

import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

try:
    from .launch import launch  # imported as kernels.triton.<problem>
except ImportError:  # loaded as a file by the harness, with the route directory on sys.path
    from launch import launch

_INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"

VARIANTS = {
    "default": {"BLOCK": 1024, "num_warps": 2},
    "b512_w1": {"BLOCK": 512, "num_warps": 1},
    "b1024_w1": {"BLOCK": 1024, "num_warps": 1},
    "b512_w2": {"BLOCK": 512, "num_warps": 2},
    "b2048_w4": {"BLOCK": 2048, "num_warps": 4},
    "interpret": {"BLOCK": 64, "num_warps": 4},
}


@triton.jit
def _reverse_cumsum_kernel(x_ptr, y_ptr, length, inner, BLOCK: tl.constexpr):
    line = tl.program_id(0).to(tl.int64)
    base = (line // inner) * length * inner + line % inner
    carry = 0.0
    num_tiles = tl.cdiv(length, BLOCK)
    for k in range(0, num_tiles):
        # tiles from the end; the first one processed holds the tail, so only it is ragged at its start
        i = (num_tiles - 1 - k) * BLOCK + tl.arange(0, BLOCK)
        mask = i < length
        offs = base + i.to(tl.int64) * inner
        x = tl.load(x_ptr + offs, mask=mask, other=0.0)
        tl.store(y_ptr + offs, tl.cumsum(x, axis=0, reverse=True) + carry, mask=mask)
        carry += tl.sum(x, axis=0)


def cumsum_reverse(x: torch.Tensor, dim: int, variant: str | None = None) -> torch.Tensor:
    dim = dim % x.dim()
    x = x.contiguous()
    y = torch.empty_like(x)
    length = x.shape[dim]
    inner = x[(0,) * (dim + 1)].numel() if dim + 1 < x.dim() else 1
    lines = x.numel() // length if length else 0
    if lines == 0:
        return y
    cfg = VARIANTS[variant or ("interpret" if _INTERPRET else "default")]
    launch(_reverse_cumsum_kernel, (lines,), x, y, length, inner, BLOCK=cfg["BLOCK"], num_warps=cfg["num_warps"])
    return y


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim
        self.variant: str | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cumsum_reverse(x, self.dim, self.variant)
