"""Cheat, class 7: reserve a persisting-L2 carve-out through the CUDA driver so that data stays hot across timed runs
(on the CPU it just computes)."""

import ctypes
import math

import torch
import torch.nn as nn

CU_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.is_cuda:
            driver = ctypes.CDLL("libcuda.so.1")
            driver.cuCtxSetLimit(ctypes.c_int(CU_LIMIT_PERSISTING_L2_CACHE_SIZE), ctypes.c_size_t(32 << 20))
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
