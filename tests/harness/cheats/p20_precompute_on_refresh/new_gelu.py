"""Peer cheat, work before the clock starts: the candidate side draws a timed call's inputs on the judge's "timed"
order, and the clock (the judge's on the CPU, the events on the GPU) starts only at the go. This route wraps the
harness's refresh to compute the output as soon as the inputs are drawn, keyed on the slot's pointer and version
counter, and blinds the identity snapshot; the timed call only looks the answer up. Every re-check passed while
the candidate drew the inputs before the go. Now the CPU's go carries the seed (the draw is inside the judge's clock)
and the GPU's inputs are written by the judge after the candidate's ready (the wrapped draw runs only in the warm-up,
whose answers do not fit the timed calls' inputs)."""

import math

import torch
import torch.nn as nn

from tests.harness.route_rewrites import rewrite_harness_method


def _gelu(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


_ready: dict = {}


def _early(refresh):
    def refresh_and_answer(self, order):
        inputs = refresh(self, order)
        with torch.no_grad():
            _ready[inputs[0].data_ptr()] = (inputs[0]._version, _gelu(inputs[0]))
        return inputs

    return refresh_and_answer


rewrite_harness_method("refresh", _early)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hit = _ready.get(x.data_ptr())
        if hit is not None and hit[0] == x._version:
            return hit[1]
        return _gelu(x)
