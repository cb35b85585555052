"""Cheat, class 9: the dim-1 sum as a batched matrix product with ones -- a vendor GEMM the reference never calls."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ones = torch.ones(x.shape[0], 1, x.shape[1], device=x.device, dtype=x.dtype)
        return torch.bmm(ones, x)
