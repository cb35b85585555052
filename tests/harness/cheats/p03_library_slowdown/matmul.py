"""Peer cheat, reference slowdown through the dispatcher (issue 13): re-register aten::mm's CPU and CUDA kernels
through the public ``torch.library`` API with one that burns 20 ms before computing (through ``mm.out``, which is not
overridden). The route's own forward sets a flag that skips the burn, so only the reference -- when it runs in a
process this route has touched -- gets slower, and the speed-up is fabricated. Its outputs are all correct."""

import time

import torch
import torch.nn as nn

BURN_S = 0.02
_own_call = False
_library = torch.library.Library("aten", "IMPL")  # kept alive: the registration lasts as long as this object


def _slow_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if not _own_call:
        deadline = time.perf_counter() + BURN_S
        while time.perf_counter() < deadline:
            pass
    out = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
    return torch.mm(a, b, out=out)


for _key in ("CPU", "CUDA"):
    _library.impl("mm", _slow_mm, _key)


class ModelNew(nn.Module):
    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        global _own_call
        _own_call = True
        try:
            return torch.matmul(A, B)
        finally:
            _own_call = False
