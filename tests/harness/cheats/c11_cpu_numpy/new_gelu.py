"""Cheat, class 11: compute on the host with numpy, outside any torch recorder, and copy the answer back."""

import numpy as np
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        host = x.cpu().numpy().astype(np.float64)
        out = 0.5 * host * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (host + 0.044715 * host**3)))
        return torch.from_numpy(out.astype(np.float32)).to(x.device)
