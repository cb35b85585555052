"""minGPT's tanh GELU: ``0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x**3)))``."""

import math

import torch
import torch.nn as nn

from kernels.problems._draw import numel, rand, slot

KERNELBENCH_NAME = "88_MinGPTNewGelu"
SHAPES = {"full": {"batch": 8192, "dim": 8192}, "smoke": {"batch": 37, "dim": 129}}
H200_MS = {"eager": 1.191, "compile": 0.133, "floor": 0.129}

# The memory plan (kernels/problems/memory.py): beyond its inputs and output, the reference's forward holds at most
# this many temporaries the size of its largest input at once (0.5 * x, and each step of the tanh chain with its input).
FORWARD_TEMPORARIES = 3
# The float64 oracle may run in slices along these dims ({input index: dim}; the output's dim 0: rows), which
# the reference does not reduce over.
ORACLE_SLICES = {0: 0}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def get_inputs(shape="full", device="cpu", generator=None, into=None):
    s = SHAPES[shape]
    return [rand(s["batch"], s["dim"], device=device, generator=generator, out=slot(into, 0))]


def get_init_inputs(shape="full"):
    return []


def floor_bytes(shape="full") -> int:
    s = SHAPES[shape]
    return 2 * numel(s["batch"], s["dim"]) * 4
