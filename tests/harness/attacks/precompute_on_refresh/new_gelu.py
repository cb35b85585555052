"""Attack on the CPU profile's timer: the work done when a timed call's inputs are drawn (peer cheat p20, with 5 ms
of it so that it shows on a loaded machine). Route code wraps the runner's ``refresh`` so that the answer is computed,
5 ms sleep included, as soon as the inputs exist, keyed on the slot's pointer and version counter, and blinds the
identity snapshot; ``forward`` only looks the answer up. Drawn on the judge's "timed" order, before the go, the work
was outside every clock; drawn from the seed the go carries, it is inside the judge's; under the GPU's protocol the
judge writes the inputs after the candidate's ready, and the answers worked out on the warm-up's draws are wrong."""

import math
import time

import torch
import torch.nn as nn

from tests.harness.route_rewrites import rewrite_harness_method

SLEEP_S = 0.005
_ready: dict = {}


def _gelu(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def _early(refresh):
    def refresh_and_answer(self, order):
        inputs = refresh(self, order)
        time.sleep(SLEEP_S)
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
