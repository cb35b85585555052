"""Sum over dim 1, keeping it: ``torch.sum(x, dim=1, keepdim=True)``."""

import torch
import torch.nn as nn

from kernels.problems._draw import numel, rand, slot

KERNELBENCH_NAME = "47_Sum_reduction_over_a_dimension"
SHAPES = {"full": {"batch": 128, "dim1": 4096, "dim2": 4095}, "smoke": {"batch": 3, "dim1": 50, "dim2": 37}}
H200_MS = {"eager": 2.107, "compile": 2.430, "floor": 2.058}

# The memory plan (kernels/problems/memory.py): beyond its inputs and output, the reference's forward holds at most
# this many temporaries the size of its largest input at once (its output only).
FORWARD_TEMPORARIES = 0
# The float64 oracle may run in slices along these dims ({input index: dim}; the output's dim 0: the batch), which
# the reference does not reduce over.
ORACLE_SLICES = {0: 0}


class Model(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim, keepdim=True)


def get_inputs(shape="full", device="cpu", generator=None, into=None):
    s = SHAPES[shape]
    return [rand(s["batch"], s["dim1"], s["dim2"], device=device, generator=generator, out=slot(into, 0))]


def get_init_inputs(shape="full"):
    return [1]


def floor_bytes(shape="full") -> int:
    s = SHAPES[shape]
    return (numel(s["batch"], s["dim1"], s["dim2"]) + numel(s["batch"], s["dim2"])) * 4
