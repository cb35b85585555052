"""Peer cheat, process-wide precision lowering through the dispatcher: re-register aten::mm (CPU and CUDA) so that
every fp32 matmul in the process rounds its operands to bfloat16 first. The candidate's output then carries bf16-level
error (~1e-3 relative), and so does the reference when it runs in this process: the precision guard's ratio
(candidate error / reference error against a float64 oracle) stays near 1. The float64 oracle is left exact (only
fp32 operands are rounded). This is the CPU-visible twin of p05's TF32 switches."""

import torch
import torch.nn as nn

_library = torch.library.Library("aten", "IMPL")


def _bf16_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
    if a.dtype == torch.float32:
        a, b = a.to(torch.bfloat16).float(), b.to(torch.bfloat16).float()
    return torch.mm(a, b, out=out)


for _key in ("CPU", "CUDA"):
    _library.impl("mm", _bf16_mm, _key)


class ModelNew(nn.Module):
    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)
