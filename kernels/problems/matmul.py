"""Square matrix multiplication: ``torch.matmul(A, B)``."""

import torch
import torch.nn as nn

from kernels.problems._draw import rand, slot

KERNELBENCH_NAME = "1_Square_matrix_multiplication_"
SHAPES = {"full": {"N": 4096}, "smoke": {"N": 67}}
H200_MS = {"eager": 2.703, "compile": 2.766, "floor": 1.008}

# The memory plan (kernels/problems/memory.py): beyond its inputs and output, the reference's forward holds at most
# this many temporaries the size of its largest input at once (its output only).
FORWARD_TEMPORARIES = 0
# The float64 oracle may run in slices along these dims ({input index: dim}; the output's dim 0: rows of A), which
# the reference does not reduce over.
ORACLE_SLICES = {0: 0}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs(shape="full", device="cpu", generator=None, into=None):
    n = SHAPES[shape]["N"]
    return [
        rand(n, n, device=device, generator=generator, out=slot(into, 0)),
        rand(n, n, device=device, generator=generator, out=slot(into, 1)),
    ]


def get_init_inputs(shape="full"):
    return []


def floor_bytes(shape="full") -> int:
    n = SHAPES[shape]["N"]
    return 3 * n * n * 4
