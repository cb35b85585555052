"""Attack: patch the harness's timer. An honest but slow kernel; at import it finds the harness's timing kit among
the live objects and wraps its timing method so that the times of its own calls are divided by 1000. An instance
attribute, so a snapshot of module and class attributes does not see it."""

import gc
import math
import time

import torch
import torch.nn as nn

SCALE = 1000.0
_timed = []  # set by ModelNew.forward: only the route's own calls are scaled, not the reference's


def _scaled(method):
    def run(*args, **kwargs):
        _timed.clear()
        result = method(*args, **kwargs)
        if not _timed:
            return result
        if isinstance(result, tuple) and len(result) == 3:  # time_one: (device ms, wall ms, output)
            return result[0] / SCALE, result[1] / SCALE, result[2]
        if isinstance(result, tuple) and len(result) == 2:  # time_runs: (Timing, kept)
            timing, kept = result
            timing.device_ms[:] = [t / SCALE for t in timing.device_ms]
            timing.wall_ms[:] = [t / SCALE for t in timing.wall_ms]
        return result

    return run


for _obj in gc.get_objects():
    if type(_obj).__name__ in ("CpuKit", "GpuKit"):
        for _name in ("time_one", "time_runs"):
            if hasattr(_obj, _name):
                setattr(_obj, _name, _scaled(getattr(_obj, _name)))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _timed.append(True)
        time.sleep(0.05)
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
