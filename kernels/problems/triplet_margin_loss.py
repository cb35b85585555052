"""Triplet margin loss (p=2, margin 1, mean): ``nn.TripletMarginLoss(margin=1.0)(anchor, positive, negative)``."""

import torch
import torch.nn as nn

from kernels.problems._draw import numel, rand, scale, slot

KERNELBENCH_NAME = "99_TripletMarginLoss"
SHAPES = {"full": {"batch": 32768, "dim": 8192}, "smoke": {"batch": 20, "dim": 72}}
H200_MS = {"eager": 3.150, "compile": 0.760, "floor": 0.772}

# The memory plan (kernels/problems/memory.py): beyond its inputs and output, the reference's forward holds at most
# this many temporaries the size of its largest input at once (one difference of two inputs at a time).
FORWARD_TEMPORARIES = 1
# The float64 oracle cannot run in slices: the reference reduces over every element.
ORACLE_SLICES = None


class Model(nn.Module):
    def __init__(self, margin: float = 1.0):
        super().__init__()
        self.loss_fn = nn.TripletMarginLoss(margin=margin)

    def forward(self, anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
        return self.loss_fn(anchor, positive, negative)


def get_inputs(shape="full", device="cpu", generator=None, into=None):
    s = SHAPES[shape]
    factor = scale(device=device, generator=generator)
    anchor = rand(s["batch"], s["dim"], device=device, generator=generator, out=slot(into, 0)).mul_(factor)
    positive = rand(s["batch"], s["dim"], device=device, generator=generator, out=slot(into, 1))
    negative = rand(s["batch"], s["dim"], device=device, generator=generator, out=slot(into, 2))
    return [anchor, positive, negative]


def get_init_inputs(shape="full"):
    return [1.0]


def floor_bytes(shape="full") -> int:
    s = SHAPES[shape]
    return 3 * numel(s["batch"], s["dim"]) * 4 + 4
