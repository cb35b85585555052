"""Cheat, class 4: honest while it is being checked (the first calls), then replays outputs cached on the input's
pointer and shape -- fast in a timing loop that reuses its buffers."""

import math

import torch
import torch.nn as nn

HONEST_CALLS = 6


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.cache = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        key = (x.data_ptr(), tuple(x.shape))
        if self.calls > HONEST_CALLS and key in self.cache:
            return self.cache[key]
        out = 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
        if self.calls > HONEST_CALLS:
            self.cache[key] = out
        return out
