"""Cheat, class 5: on a GPU, launch the work on a side stream the timing events on the current stream do not see.
(On the CPU it just computes; the static pass catches the stream creation everywhere, and on a GPU the wall-time vs
event-time check catches it too when the static pass is skipped.)"""

import math

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not x.is_cuda:
            return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
        if self.side is None:
            self.side = torch.cuda.Stream()
        out = torch.empty_like(x)
        with torch.cuda.stream(self.side):
            for _ in range(2):  # unseen work
                out.copy_(0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0)))))
        return out
