"""Attack: honest only on the calls a guardrail watched (issue 36). Version 1 recorded ops on the first correctness
call only, and that call was the only one without canaries: this route counts its calls, runs the reference's own ops
on the first five (the correctness calls) and torch's fused gelu, a library kernel the reference does not call, on
every later call, the timed ones included."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

_calls = [0]


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _calls[0] += 1
        if _calls[0] <= 5:
            return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
        return F.gelu(x, approximate="tanh")
