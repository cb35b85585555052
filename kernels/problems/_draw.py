"""Random draws shared by the reference problems: uniform [0, 1) as KernelBench's ``torch.rand``.

A problem's ``get_inputs(..., into=earlier)`` draws into the tensors of an earlier draw of the same shape, in place:
the same values a fresh draw from the same generator state gives, without the fresh tensors and the copy a timed
call's slot would otherwise cost (at full shapes a draw moves gigabytes, and the verifier draws one per timed call).
"""

import torch


def rand(*shape: int, device="cpu", generator=None, out: torch.Tensor | None = None) -> torch.Tensor:
    return torch.rand(shape, device=device, generator=generator, dtype=torch.float32, out=out)


def scale(device="cpu", generator=None) -> torch.Tensor:
    """KernelBench's ``s = torch.rand(())``: one random scale shared by a problem's input."""
    return torch.rand((), device=device, generator=generator, dtype=torch.float32)


def slot(into: list | None, index: int) -> torch.Tensor | None:
    """The earlier draw's tensor that input ``index`` is drawn into, or None for a fresh one."""
    return None if into is None else into[index]


def placed(value: torch.Tensor, into: list | None, index: int) -> torch.Tensor:
    """``value`` as input ``index``: copied into the earlier draw's tensor where there is one (small inputs only)."""
    return value if into is None else into[index].copy_(value)


def numel(*shape: int) -> int:
    out = 1
    for d in shape:
        out *= d
    return out
