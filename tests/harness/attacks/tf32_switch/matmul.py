"""Attack: lower matmul precision process-wide, so that the reference (when it shares the process) is lowered with
the candidate and the precision ratio stays 1. On the GPU that is the TF32 switches; the CPU has no TF32, so the same
process-wide move is made there by re-registering aten::mm's CPU kernel to multiply in bfloat16."""

import torch
import torch.nn as nn

torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
torch.set_float32_matmul_precision("medium")


def _bf16_mm(a, b):
    return torch.bmm(a.bfloat16()[None], b.bfloat16()[None])[0].to(a.dtype)


_lib = torch.library.Library("aten", "IMPL")
_lib.impl("mm", _bf16_mm, "CPU")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)
