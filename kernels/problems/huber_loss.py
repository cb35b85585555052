"""Mean smooth-L1 (Huber, beta 1) loss: ``F.smooth_l1_loss(predictions, targets)``."""

import torch
import torch.nn as nn
import torch.nn.functional as F

from kernels.problems._draw import numel, rand, scale, slot

KERNELBENCH_NAME = "96_HuberLoss"
SHAPES = {"full": {"batch": 32768, "dim": 32768}, "smoke": {"batch": 40, "dim": 70}}
H200_MS = {"eager": 3.975, "compile": 1.940, "floor": 2.058}

# The memory plan (kernels/problems/memory.py): beyond its inputs and output, the reference's forward holds at most
# this many temporaries the size of its largest input at once (the element-wise loss before its mean).
FORWARD_TEMPORARIES = 1
# The float64 oracle cannot run in slices: the reference reduces over every element.
ORACLE_SLICES = None


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.smooth_l1_loss(predictions, targets)


def get_inputs(shape="full", device="cpu", generator=None, into=None):
    s = SHAPES[shape]
    factor = scale(device=device, generator=generator)
    predictions = rand(s["batch"], s["dim"], device=device, generator=generator, out=slot(into, 0)).mul_(factor)
    targets = rand(s["batch"], s["dim"], device=device, generator=generator, out=slot(into, 1))
    return [predictions, targets]


def get_init_inputs(shape="full"):
    return []


def floor_bytes(shape="full") -> int:
    s = SHAPES[shape]
    return 2 * numel(s["batch"], s["dim"]) * 4 + 4
