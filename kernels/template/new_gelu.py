"""A route file to start from: copy it to routes/<route>/new_gelu.py (AGENTS.md, "3. Write kernels").

A route file ``routes/<route>/<id>.py`` defines ``ModelNew`` with the same constructor and ``forward`` signature as
``Model`` in ``kernels/problems/<id>.py`` (here: no constructor arguments, one input ``x``). What it may call
(class 9 of the guardrails): the torch ops the reference itself calls, ops that only allocate, view or copy memory
(``torch.empty_like``, ``.contiguous()``, ``.view``), and your own kernels (Triton, as here). Any other torch op --
even a plain-PyTorch rewrite with ``torch.where`` or ``abs`` where the reference uses neither -- fails the check as
"class 9 (library calls)". Work in fp32 at least, on the inputs' stream, and never write to the inputs.

On a machine without a GPU, ``kb verify`` runs Triton in its interpreter (TRITON_INTERPRET=1), as the service's CPU
checks do; only a check on the rules' pinned GPU at full shapes gives a verified score.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def new_gelu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)  # sqrt(2 / pi) * (x + 0.044715 x^3)
    tanh = 1.0 - 2.0 / (tl.exp(2.0 * inner) + 1.0)  # tanh(y) = 1 - 2 / (exp(2y) + 1), finite for any y
    tl.store(out_ptr + offsets, 0.5 * x * (1.0 + tanh), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):  # the same arguments as Model's (get_init_inputs)
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # the same inputs as Model's (get_inputs)
        x = x.contiguous()
        out = torch.empty_like(x)  # a new output: never the input, never a buffer kept from an earlier call
        n = x.numel()
        block = 1024
        new_gelu_kernel[(triton.cdiv(n, block),)](x, out, n, BLOCK=block)
        return out
