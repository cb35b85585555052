"""RMS normalisation over the feature dim: ``x / sqrt(mean(x**2, dim=1, keepdim=True) + eps)``."""

import torch
import torch.nn as nn

from kernels.problems._draw import numel, rand, slot

KERNELBENCH_NAME = "36_RMSNorm_"
SHAPES = {
    "full": {"batch": 112, "features": 64, "dim1": 512, "dim2": 512},
    "smoke": {"batch": 3, "features": 7, "dim1": 5, "dim2": 9},
}
H200_MS = {"eager": 11.331, "compile": 3.994, "floor": 3.601}

# The memory plan (kernels/problems/memory.py): beyond its inputs and output, the reference's forward holds at most
# this many temporaries the size of its largest input at once (x**2).
FORWARD_TEMPORARIES = 1
# The float64 oracle may run in slices along these dims ({input index: dim}; the output's dim 0: the batch), which
# the reference does not reduce over.
ORACLE_SLICES = {0: 0}


class Model(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.sqrt(torch.mean(x**2, dim=1, keepdim=True) + self.eps)
        return x / rms


def get_inputs(shape="full", device="cpu", generator=None, into=None):
    s = SHAPES[shape]
    return [
        rand(s["batch"], s["features"], s["dim1"], s["dim2"], device=device, generator=generator, out=slot(into, 0))
    ]


def get_init_inputs(shape="full"):
    return [SHAPES[shape]["features"], 1e-5]


def floor_bytes(shape="full") -> int:
    s = SHAPES[shape]
    return 2 * numel(s["batch"], s["features"], s["dim1"], s["dim2"]) * 4
