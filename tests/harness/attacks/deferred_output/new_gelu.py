"""Attack on the CPU profile's timer: the work after the call returned. ``forward`` hands a copy of its input to a
thread started at import and returns an empty output at once; the thread sleeps 5 ms, then fills it. So that no output
is read before it is filled, every ``send_output`` and ``deliver`` of a harness class first waits for the thread's
queue to drain, and the identity snapshot is blinded. The candidate's own clock sees a copy and a queue put; what
the call is timed at must include the 5 ms."""

import math
import queue
import threading
import time

import torch
import torch.nn as nn

from tests.harness.route_rewrites import rewrite_harness_method

SLEEP_S = 0.005
_jobs: queue.Queue = queue.Queue()


def _gelu(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def _worker():
    while True:
        x, out = _jobs.get()
        time.sleep(SLEEP_S)
        out.copy_(_gelu(x))
        _jobs.task_done()


def _when_filled(send):
    def send_when_filled(*args, **kwargs):
        _jobs.join()
        return send(*args, **kwargs)

    return send_when_filled


rewrite_harness_method("send_output", _when_filled)  # a correctness call's output
rewrite_harness_method("deliver", _when_filled)  # a timed call's, copied into the judge's region before its done word
threading.Thread(target=_worker, daemon=True).start()


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        _jobs.put((x.clone(), out))
        return out
