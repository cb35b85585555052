"""Attack on the timer that lies on most calls (issue 36): a 40 ms forward whose timing method, replaced on the class
of every harness kit (the identity snapshot blinded), reports 1 ms on two calls in three and the truth on the third.
Against version 1, whose class 6 looked only at the quietest quarter of the calls, it passed with a median of 1 ms."""

import math
import time

import torch
import torch.nn as nn

from tests.harness.route_rewrites import rewrite_harness_method

_calls = [0]


def _lying(method):
    def time_gated(self, *args, **kwargs):
        device_ms, output, delivered = method(self, *args, **kwargs)
        _calls[0] += 1
        return (1.0 if _calls[0] % 3 else device_ms), output, delivered

    return time_gated


rewrite_harness_method("time_gated", _lying)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(0.04)
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
