"""Attack on version 2's gate: the done word written before the work. The route's timing method, replaced on the class
of every harness kit (the identity snapshot blinded), writes the call's done word as soon as the judge opens the gate
and only then runs the call and copies its output -- on the GPU, route code's host writing the page it maps; here the
CPU form's host. The judge's clock then sees an empty call: what it copies at the done word must still be complete."""

import math
import time

import torch
import torch.nn as nn

from tests.harness.route_rewrites import rewrite_harness_method


def _done_first(method):
    def time_gated(self, gate, seq, run, deliver, announce, deadline):
        announce()
        if not gate.wait_open(seq, deadline):
            raise TimeoutError("the gate never opened")
        gate.signal(seq)  # "done", before anything was done
        time.sleep(0.01)
        result = run()
        return 0.001, result, deliver(result)

    return time_gated


rewrite_harness_method("time_gated", _done_first)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
