"""Attack: cache outputs keyed on (object id, data pointer, version counter, shape). A harness that refreshes only the
re-checked calls' inputs in place (copy_ bumps the version counter) makes this cache recompute exactly on the calls
that are checked and replay on all the others."""

import math

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = (id(x), x.data_ptr(), x._version, tuple(x.shape))
        if key in self.cache:
            return self.cache[key]
        out = 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
        for _ in range(20):  # make the honest path expensive, so that replay pays
            out = out * 1.0
        self.cache[key] = out
        return out
