"""KL divergence, batch mean: ``F.kl_div(torch.log(predictions), targets, reduction="batchmean")``."""

import torch
import torch.nn as nn
import torch.nn.functional as F

from kernels.problems._draw import numel, rand, scale, slot

KERNELBENCH_NAME = "98_KLDivLoss"
SHAPES = {"full": {"batch": 16384, "dim": 16384}, "smoke": {"batch": 16, "dim": 130}}
H200_MS = {"eager": 2.745, "compile": 0.719, "floor": 0.514}

# The memory plan (kernels/problems/memory.py): beyond its inputs and output, the reference's forward holds at most
# this many temporaries the size of its largest input at once (log(predictions), the divergence's element-wise terms).
FORWARD_TEMPORARIES = 3
# The float64 oracle cannot run in slices: the reference reduces over every element.
ORACLE_SLICES = None


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.kl_div(torch.log(predictions), targets, reduction="batchmean")


def get_inputs(shape="full", device="cpu", generator=None, into=None):
    s = SHAPES[shape]
    factor = scale(device=device, generator=generator)
    scaled = rand(s["batch"], s["dim"], device=device, generator=generator).mul_(factor)
    predictions = torch.softmax(scaled, dim=-1, out=slot(into, 0))
    del scaled  # so that the second draw reuses its memory (1 GB at full shape)
    uniform = rand(s["batch"], s["dim"], device=device, generator=generator)
    targets = torch.softmax(uniform, dim=-1, out=slot(into, 1))
    return [predictions, targets]


def get_init_inputs(shape="full"):
    return []


def floor_bytes(shape="full") -> int:
    s = SHAPES[shape]
    return 2 * numel(s["batch"], s["dim"]) * 4 + 4
