"""Random draws shared by the reference problems: uniform [0, 1) as KernelBench's ``torch.rand``."""

import torch


def rand(*shape: int, device="cpu", generator=None) -> torch.Tensor:
    return torch.rand(shape, device=device, generator=generator, dtype=torch.float32)


def scale(device="cpu", generator=None) -> torch.Tensor:
    """KernelBench's ``s = torch.rand(())``: one random scale shared by a problem's input."""
    return torch.rand((), device=device, generator=generator, dtype=torch.float32)


def numel(*shape: int) -> int:
    out = 1
    for d in shape:
        out *= d
    return out
