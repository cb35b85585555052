"""Peer cheat, p23 without a resident kernel (GPU only): where a kernel spinning on the inputs holds the device for
whole time slices, this route looks for them from the host instead, a little at a time. The runner's ``time_on_go``
is wrapped (the identity snapshot blinded): before the candidate says it is ready, a thread starts that reads the
slot's first and last elements with a small device copy on a stream of its own, over and over, until the judge has
written new ones; then it computes the answer and ends (no thread outlives the call). ``forward`` waits for the thread
and hands back a copy of that answer. Each read is a short kernel of the candidate's context, which the GPU has to
switch to and back from while the judge draws: the judge's drawing and flush take longer by those switches (class 5,
check_prepare)."""

import math
import threading

import torch
import torch.nn as nn

from tests.harness.route_rewrites import rewrite_harness_method

POLL_LIMIT = 200_000
_early: dict = {}


def _gelu(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def _poll(x: torch.Tensor, stream: torch.cuda.Stream) -> None:
    with torch.cuda.stream(stream), torch.no_grad():
        ends = torch.stack([x[0], x[-1]])
        for _ in range(POLL_LIMIT):
            now = torch.stack([x[0], x[-1]])
            if bool((now != ends).all()):
                break
        _early[x.data_ptr()] = _gelu(x)
        stream.synchronize()


def _watch(time_on_go):
    def watch_then_time(self, run):
        inputs = next((c.cell_contents for c in run.__closure__ or () if isinstance(c.cell_contents, list)), None)
        if self.device.type == "cuda" and inputs:
            x = inputs[0]
            _early.pop(x.data_ptr(), None)
            poller = threading.Thread(target=_poll, args=(x, torch.cuda.Stream(x.device)))
            poller.start()
            _early["thread"] = poller
        return time_on_go(self, run)

    return watch_then_time


rewrite_harness_method("time_on_go", _watch)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        poller = _early.pop("thread", None)
        if poller is not None:
            poller.join()
        answer = _early.get(x.data_ptr())
        return answer.clone() if answer is not None else _gelu(x)
