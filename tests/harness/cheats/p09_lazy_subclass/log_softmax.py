"""Peer cheat, lazy output by tensor-subclass deferral (gpu-mode/reference-kernels#162, "lazy output"): forward
returns a placeholder subclass at once; the real log_softmax runs only when something first applies a torch function
to the result -- the untimed comparison, not the timed call."""

import torch
import torch.nn as nn


class _Deferred(torch.Tensor):
    @staticmethod
    def __new__(cls, source: torch.Tensor, dim: int):
        placeholder = torch.Tensor._make_subclass(cls, torch.empty_like(source))
        placeholder._source, placeholder._dim, placeholder._done = source, dim, False
        return placeholder

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        for arg in list(args) + list((kwargs or {}).values()):
            if isinstance(arg, _Deferred) and not arg._done:
                arg._done = True
                with torch._C.DisableTorchFunctionSubclass():
                    arg.copy_(torch.log_softmax(arg._source, dim=arg._dim))
        return super().__torch_function__(func, types, args, kwargs)


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _Deferred(x, self.dim)
