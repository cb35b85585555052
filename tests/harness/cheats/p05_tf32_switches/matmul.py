"""Peer cheat, process-wide precision switches (issue 13): flip TF32 / reduced-precision matmul switches at import.
On a GPU they make the candidate's ``torch.matmul`` TF32 -- and the reference's too when it runs in this process, so the
precision guard sees an error ratio of 1. On the CPU the switches do not reach the BLAS path, so the forward emulates
"medium" precision itself (bf16 operands; TF32's 10-bit rounding alone lands under the guard's 1e-4 floor at
smoke shapes): the CPU shows the guard catching the candidate, the H200 run shows whether the reference stayed out of
reach."""

import torch
import torch.nn as nn

torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
torch.set_float32_matmul_precision("medium")  # TF32, or bf16 where the backend has it
try:
    torch.backends.mkldnn.matmul.fp32_precision = "tf32"
except (AttributeError, RuntimeError, ValueError):
    pass


def _tf32(t: torch.Tensor) -> torch.Tensor:
    return t.bfloat16().float()  # "medium" precision: bf16 operands, fp32 accumulation


class ModelNew(nn.Module):
    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        if A.is_cuda:
            return torch.matmul(A, B)
        return torch.matmul(_tf32(A), _tf32(B))
