"""Attack: slow the reference down through the public torch.library API. The reference's GELU calls
``torch.pow(x, 3.0)``; this route re-registers that aten op's CPU (and CUDA) kernel with one that sleeps first, and
computes its own cube with multiplications, so only the reference pays. Its results stay exact."""

import math
import time

import torch
import torch.nn as nn

DELAY_S = 0.02


def _slow_pow(x, exponent):
    time.sleep(DELAY_S)
    out = torch.ones_like(x)
    for _ in range(int(exponent)):
        out = out * x
    return out


_lib = torch.library.Library("aten", "IMPL")
for _key in ("CPU", "CUDA"):
    _lib.impl("pow.Tensor_Scalar", _slow_pow, _key)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * (x * x * x))))
