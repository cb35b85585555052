"""Mean hinge loss, targets broadcast along the last dim: ``mean(clamp(1 - predictions * targets, min=0))``."""

import torch
import torch.nn as nn

from kernels.problems._draw import numel, placed, rand, slot

KERNELBENCH_NAME = "100_HingeLoss"
# targets (batch,) broadcasts along the last dim of predictions (batch, batch), so the two sizes are one.
SHAPES = {"full": {"batch": 32768}, "smoke": {"batch": 45}}
H200_MS = {"eager": 8.019, "compile": 1.104, "floor": 1.029}

# The memory plan (kernels/problems/memory.py): beyond its inputs and output, the reference's forward holds at most
# this many temporaries the size of its largest input at once (predictions * targets and 1 minus it).
FORWARD_TEMPORARIES = 2
# The float64 oracle cannot run in slices: the reference reduces over every element.
ORACLE_SLICES = None


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return torch.mean(torch.clamp(1 - predictions * targets, min=0))


def get_inputs(shape="full", device="cpu", generator=None, into=None):
    n = SHAPES[shape]["batch"]
    predictions = rand(n, n, device=device, generator=generator, out=slot(into, 0))
    targets = placed(torch.randint(0, 2, (n,), device=device, generator=generator).float() * 2 - 1, into, 1)
    return [predictions, targets]


def get_init_inputs(shape="full"):
    return []


def floor_bytes(shape="full") -> int:
    n = SHAPES[shape]["batch"]
    return (numel(n, n) + n + 1) * 4
