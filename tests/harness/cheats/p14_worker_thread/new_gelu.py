"""Peer cheat, hidden work on a thread (and a side stream on a GPU): a worker thread started at import -- before any
per-call thread count is taken -- does the real computation. After the first eight calls (the correctness sets),
forward waits for the worker's previous job (so that no job reads an input buffer the harness has since refilled),
hands it this input and returns the still-empty output at once: the timed call measures a queue put, and the worker
fills the output a moment later, before the harness gets round to comparing it."""

import math
import queue
import threading

import torch
import torch.nn as nn

HONEST_CALLS = 8
_jobs: queue.Queue = queue.Queue()


def _gelu(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def _worker():
    side = None
    while True:
        x, out, done = _jobs.get()
        if x.is_cuda:
            side = side or torch.cuda.Stream(device=x.device)
            with torch.cuda.stream(side):
                out.copy_(_gelu(x))
        else:
            out.copy_(_gelu(x))
        done.set()


threading.Thread(target=_worker, daemon=True, name="kb-worker").start()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.previous = threading.Event()
        self.previous.set()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls <= HONEST_CALLS:
            return _gelu(x)
        self.previous.wait()
        out, self.previous = torch.empty_like(x), threading.Event()
        _jobs.put((x, out, self.previous))
        return out
