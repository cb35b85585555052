"""Peer cheat, looking for the inputs before the go (GPU only): since the judge draws a timed call's inputs into
memory the candidate maps just before its go, route code that wants them early must watch that memory from the
device. Here the runner's ``time_on_go`` is wrapped (the identity snapshot blinded): before the candidate says it is
ready, a Triton kernel is launched that spins on the slot's first and last elements until the judge has written
new ones, then computes the answer into a buffer of its own; the runner's synchronize before "ready" is skipped once,
so that the kernel is still running when the judge draws. ``forward`` hands back a copy of that answer. Every
re-checked output is right when the kernel saw the whole draw; what the judge sees is its own drawing and L2 flush
stretched, since the GPU time-slices between the two processes' contexts (class 5, check_prepare)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

from tests.harness.route_rewrites import rewrite_harness_method

SPIN_LIMIT = 4_000_000
_early_answer: dict = {}


@triton.jit
def _gelu_once_written(x_ptr, out_ptr, n, old_first, old_last, limit, BLOCK: tl.constexpr):
    first = tl.load(x_ptr, volatile=True)
    last = tl.load(x_ptr + n - 1, volatile=True)
    count = 0
    while ((first == old_first) | (last == old_last)) & (count < limit):
        first = tl.load(x_ptr, volatile=True)
        last = tl.load(x_ptr + n - 1, volatile=True)
        count += 1
    pid, programs = tl.program_id(0), tl.num_programs(0)
    for start in range(pid * BLOCK, n, programs * BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask, volatile=True)
        inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
        y = 0.5 * x * (1.0 + (2.0 / (1.0 + tl.exp(-2.0 * inner)) - 1.0))
        tl.store(out_ptr + offsets, y, mask=mask)


def _early(time_on_go):
    def watch_then_time(self, run):
        # The timed call's inputs, from the call ``run`` closes over (the runner's dispatch table holds its own
        # methods, so the wrapped method is the one looked up per call).
        inputs = next((c.cell_contents for c in run.__closure__ or () if isinstance(c.cell_contents, list)), None)
        if self.device.type == "cuda" and inputs:
            x = inputs[0].reshape(-1)
            out = _early_answer.setdefault(x.data_ptr(), torch.empty_like(x))
            programs = 4 * torch.cuda.get_device_properties(x.device).multi_processor_count
            first, last = float(x[0]), float(x[-1])
            _gelu_once_written[(programs,)](x, out, x.numel(), first, last, SPIN_LIMIT, BLOCK=1024)
            real_sync = self.kit.sync

            def skip_once():  # the synchronize before "ready" would wait for the kernel above
                self.kit.sync = real_sync

            self.kit.sync = skip_once
        return time_on_go(self, run)

    return watch_then_time


rewrite_harness_method("time_on_go", _early)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        answer = _early_answer.get(x.data_ptr())
        if answer is not None:
            return answer.view(x.shape).clone()
        inner = 0.7978845608028654 * (x + 0.044715 * torch.pow(x, 3.0))
        return 0.5 * x * (1.0 + torch.tanh(inner))
