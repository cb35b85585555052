"""Attack: full precision only where it was watched (issue 36). Version 1 measured the error against the float64
oracle on the first correctness call alone: this route is fp32 on its first five calls (the correctness calls) and
multiplies in 16 bits on every later call, the timed ones included."""

import torch
import torch.nn as nn

_calls = [0]


class ModelNew(nn.Module):
    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        _calls[0] += 1
        if _calls[0] <= 5:
            return torch.matmul(A, B)
        return torch.matmul(A.to(torch.bfloat16), B.to(torch.bfloat16)).to(torch.float32)
