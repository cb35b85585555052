"""Peer cheat, p20 made to pass the floor: the answer computed when the runner draws a timed call's inputs (the
harness's refresh wrapped, the identity snapshot blinded), with the project's own Triton kernel so that the work is
as short as it can be, and handed back from ``forward`` as a fresh copy, so that the timed call costs a copy of the
output: on the GPU about the bandwidth floor itself for layer_norm (the output is as large as the input), where the
project's honest two-pass kernel runs at 40-45 % of it. Every re-check passes: the answer is right, it was computed
outside the events. On the CPU the seed comes with the go, so the draw and the precompute are inside the judge's
clock and it gains nothing. On the GPU it passed at 48.4x, and at 47.0x under a bound on the time of the "timed"
order (isolation/runs.md, run13 and run16), while the candidate drew the inputs; now the judge writes them after
the candidate's ready and the wrapped draw runs in the warm-up only: class 4 (runs.md, run17; docs/decisions/0005).

The census knows a route's own Triton kernels by the names its files give ``triton.jit`` functions: the two stubs
below claim the project's kernels (named class 9 as not the route's own on the H200 without them: runs.md, run15),
as a copy of their source would."""

import torch
import triton

from kernels.triton import layer_norm as fast
from tests.harness.route_rewrites import rewrite_harness_method

_ready: dict = {}
_models: list = []


def _early(refresh):
    def refresh_and_answer(self, order):
        inputs = refresh(self, order)
        if _models:
            with torch.no_grad():
                _ready[inputs[0].data_ptr()] = (inputs[0]._version, fast.ModelNew.forward(_models[-1], inputs[0]))
        return inputs

    return refresh_and_answer


rewrite_harness_method("refresh", _early)


@triton.jit
def _chunk_moments():
    pass


@triton.jit
def _normalize():
    pass


class ModelNew(fast.ModelNew):
    def __init__(self, normalized_shape: tuple):
        super().__init__(normalized_shape)
        _models.append(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hit = _ready.get(x.data_ptr())
        if hit is not None and hit[0] == x._version:
            return hit[1].clone()
        return super().forward(x)
