"""Attack: swap the code object of the reference's ``Model.forward`` for a cheap one, and compute the same cheap
thing in ModelNew: when the reference shares the process, both agree and the candidate is "faster"."""

import torch
import torch.nn as nn

from kernels.problems import new_gelu as reference


def _cheap(self, x):
    return x * 0.5


reference.Model.forward.__code__ = _cheap.__code__


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 0.5
