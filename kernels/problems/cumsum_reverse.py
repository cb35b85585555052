"""Reverse cumulative sum along dim 1: ``torch.cumsum(x.flip(1), dim=1).flip(1)``."""

import torch
import torch.nn as nn

from kernels.problems._draw import numel, rand, slot

KERNELBENCH_NAME = "91_cumsum_reverse"
SHAPES = {"full": {"batch": 32768, "dim": 32768}, "smoke": {"batch": 5, "dim": 300}}
H200_MS = {"eager": 10.156, "compile": 6.336, "floor": 2.058}

# The memory plan (kernels/problems/memory.py): beyond its inputs and output, the reference's forward holds at most
# this many temporaries the size of its largest input at once (the flipped input and its cumsum).
FORWARD_TEMPORARIES = 2
# The float64 oracle may run in slices along these dims ({input index: dim}; the output's dim 0: rows), which
# the reference does not reduce over.
ORACLE_SLICES = {0: 0}


class Model(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x.flip(self.dim), dim=self.dim).flip(self.dim)


def get_inputs(shape="full", device="cpu", generator=None, into=None):
    s = SHAPES[shape]
    return [rand(s["batch"], s["dim"], device=device, generator=generator, out=slot(into, 0))]


def get_init_inputs(shape="full"):
    return [1]


def floor_bytes(shape="full") -> int:
    s = SHAPES[shape]
    return 2 * numel(s["batch"], s["dim"]) * 4
