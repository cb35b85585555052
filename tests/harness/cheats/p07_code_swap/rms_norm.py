"""Peer cheat, swapping the reference's code (issue 13): at import, find every loaded ``Model`` class of an
``rms_norm`` module (the reference problem, however the harness imported it) and replace its ``forward.__code__`` with
code that computes the same result thirty times over. The reference's results stay right; its time grows 30x. The
candidate computes honestly, once."""

import sys

import torch
import torch.nn as nn

REPEATS = 30


def _slow_forward(self, x):
    for _ in range(30):
        rms = torch.sqrt(torch.mean(x**2, dim=1, keepdim=True) + self.eps)
        result = x / rms
    return result


def _swap_reference_code():
    try:
        import kernels.problems.rms_norm  # noqa: F401 -- loaded so that its Model is swapped before the harness runs it
    except ImportError:
        pass
    for name, module in list(sys.modules.items()):
        model = getattr(module, "Model", None)
        if name.endswith("rms_norm") and isinstance(model, type) and hasattr(model, "forward"):
            model.forward.__code__ = _slow_forward.__code__


_swap_reference_code()


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / torch.sqrt(torch.mean(x**2, dim=1, keepdim=True) + self.eps)
