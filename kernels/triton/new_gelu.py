"""minGPT's tanh GELU in one elementwise Triton pass.

0.5 * x * (1 + tanh(u)) equals x * sigmoid(2u) exactly, so the kernel computes x / (1 + exp(-2u)): one exp instead of
a tanh, and no cancellation in 1 + tanh(u) for negative x (more accurate than the reference there).
"""

import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
_SQRT_2_OVER_PI = tl.constexpr(0.7978845608028654)

# name -> launch parameters; the bench times each, ModelNew uses "default" (or "interpret" under the interpreter).
VARIANTS = {
    "default": {"BLOCK": 4096, "num_warps": 8},
    "b2048_w4": {"BLOCK": 2048, "num_warps": 4},
    "b8192_w8": {"BLOCK": 8192, "num_warps": 8},
    "interpret": {"BLOCK": 256, "num_warps": 4},
}


@triton.jit
def _gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    u = _SQRT_2_OVER_PI * (x + 0.044715 * (x * x * x))
    y = x / (1.0 + tl.exp(-2.0 * u))
    tl.store(y_ptr + offs, y, mask=mask)


def new_gelu(x: torch.Tensor, variant: str | None = None) -> torch.Tensor:
    x = x.contiguous()
    y = torch.empty_like(x)
    cfg = VARIANTS[variant or ("interpret" if _INTERPRET else "default")]
    n = x.numel()
    _gelu_kernel[(triton.cdiv(n, cfg["BLOCK"]),)](x, y, n, BLOCK=cfg["BLOCK"], num_warps=cfg["num_warps"])
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.variant: str | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return new_gelu(x, self.variant)
