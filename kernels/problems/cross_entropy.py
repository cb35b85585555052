"""Mean cross-entropy of class scores against integer targets: ``F.cross_entropy(predictions, targets)``."""

import torch
import torch.nn as nn
import torch.nn.functional as F

from kernels.problems._draw import numel, rand, slot

KERNELBENCH_NAME = "95_CrossEntropyLoss"
SHAPES = {"full": {"batch": 32768, "classes": 4096}, "smoke": {"batch": 33, "classes": 100}}
H200_MS = {"eager": 0.411, "compile": 0.337, "floor": 0.129}

# The memory plan (kernels/problems/memory.py): beyond its inputs and output, the reference's forward holds at most
# this many temporaries the size of its largest input at once (the log-softmax of the predictions).
FORWARD_TEMPORARIES = 1
# The float64 oracle cannot run in slices: the reference reduces over every element.
ORACLE_SLICES = None


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(predictions, targets)


def get_inputs(shape="full", device="cpu", generator=None, into=None):
    s = SHAPES[shape]
    predictions = rand(s["batch"], s["classes"], device=device, generator=generator, out=slot(into, 0))
    targets = torch.randint(0, s["classes"], (s["batch"],), device=device, generator=generator, out=slot(into, 1))
    return [predictions, targets]


def get_init_inputs(shape="full"):
    return []


def floor_bytes(shape="full") -> int:
    s = SHAPES[shape]
    return numel(s["batch"], s["classes"]) * 4 + s["batch"] * 8 + 4
