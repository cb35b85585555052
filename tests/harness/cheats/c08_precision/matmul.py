"""Cheat, class 8: the fp32 matmul done in bf16 -- well inside atol/rtol 1e-2, and several times faster on a GPU."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A.bfloat16(), B.bfloat16()).float()
