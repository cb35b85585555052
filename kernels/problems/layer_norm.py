"""Layer normalisation over the last three dims, with learnable weight and bias: ``nn.LayerNorm((64, 256, 256))``.

The weight and bias live at ``ln.weight`` and ``ln.bias``; a route's ``ModelNew`` keeps those names so that the
verifier can give both models the same randomised parameters.
"""

import torch
import torch.nn as nn

from kernels.problems._draw import numel, rand, slot

KERNELBENCH_NAME = "40_LayerNorm"
SHAPES = {
    "full": {"batch": 16, "features": 64, "dim1": 256, "dim2": 256},
    "smoke": {"batch": 3, "features": 4, "dim1": 6, "dim2": 11},
}
H200_MS = {"eager": 8.090, "compile": 0.340, "floor": 0.129}

# The memory plan (kernels/problems/memory.py): beyond its inputs and output, the reference's forward holds at most
# this many temporaries the size of its largest input at once (its output and per-row statistics).
FORWARD_TEMPORARIES = 0
# The float64 oracle may run in slices along these dims ({input index: dim}; the output's dim 0: the batch), which
# the reference does not reduce over.
ORACLE_SLICES = {0: 0}


class Model(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


def get_inputs(shape="full", device="cpu", generator=None, into=None):
    s = SHAPES[shape]
    return [
        rand(s["batch"], s["features"], s["dim1"], s["dim2"], device=device, generator=generator, out=slot(into, 0))
    ]


def get_init_inputs(shape="full"):
    s = SHAPES[shape]
    return [(s["features"], s["dim1"], s["dim2"])]


def floor_bytes(shape="full") -> int:
    s = SHAPES[shape]
    params = numel(s["features"], s["dim1"], s["dim2"])
    return (2 * numel(s["batch"]) * params + 2 * params) * 4
