"""Peer cheat, timer patch (gpu-mode/reference-kernels#162, "timer / stats patch"): the kernel stays honest, but at
import every clock a harness might time it with -- ``time.perf_counter(_ns)``, ``time.monotonic(_ns)``, ``time.time``
and ``torch.cuda.Event.elapsed_time`` -- is replaced by one that runs 100x slow, so intervals read 1/100th of the truth.
A harness that bound its own copies before route code ran sees the swap in its identity snapshot."""

import math
import time

import torch
import torch.nn as nn

SCALE = 100.0


def _slowed(clock):
    origin = clock()
    return lambda: origin + (clock() - origin) / SCALE


def _slowed_ns(clock):
    origin = clock()
    return lambda: origin + int((clock() - origin) / SCALE)


time.perf_counter = _slowed(time.perf_counter)
time.monotonic = _slowed(time.monotonic)
time.time = _slowed(time.time)
time.perf_counter_ns = _slowed_ns(time.perf_counter_ns)
time.monotonic_ns = _slowed_ns(time.monotonic_ns)
_elapsed = torch.cuda.Event.elapsed_time
torch.cuda.Event.elapsed_time = lambda self, end: _elapsed(self, end) / SCALE


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
