"""Peer cheat, timer patch with the in-process watchdog blinded: p10's slowed clocks, but first every ``changes``
method of a class in a loaded harness module (the identity snapshot) is made to report nothing, and every global of a
harness module that *is* one of the clocks (a private copy bound at import) is rebound to the slowed one too. Only a
clock outside this process can then see that the reported times are 1/100th of the truth."""

import math
import sys
import time

import torch
import torch.nn as nn

SCALE = 100.0


def _slowed(clock):
    origin = clock()
    return lambda: origin + (clock() - origin) / SCALE


def _harness_module(name: str) -> bool:
    return name.startswith("services.") or any(part in name for part in ("harness", "judge", "verif"))


_real = {
    time.perf_counter: _slowed(time.perf_counter),
    time.monotonic: _slowed(time.monotonic),
    time.time: _slowed(time.time),
}
_elapsed = torch.cuda.Event.elapsed_time
_fake_elapsed = lambda self, end: _elapsed(self, end) / SCALE  # noqa: E731
_real[_elapsed] = _fake_elapsed

for _name, _module in list(sys.modules.items()):
    if _module is None or not _harness_module(_name):
        continue
    for _attr, _value in list(vars(_module).items()):
        if isinstance(_value, type) and callable(vars(_value).get("changes")):
            _value.changes = lambda self: []
        elif callable(_value) and not isinstance(_value, type):
            try:
                if _value in _real:
                    setattr(_module, _attr, _real[_value])
            except TypeError:  # unhashable callables are no clock
                pass
time.perf_counter, time.monotonic, time.time = _real[time.perf_counter], _real[time.monotonic], _real[time.time]
torch.cuda.Event.elapsed_time = _fake_elapsed


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
