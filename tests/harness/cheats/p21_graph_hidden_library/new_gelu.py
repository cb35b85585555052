"""Peer cheat, a library call hidden in a CUDA graph (class 9): torch's fused GELU (aten::gelu), which the reference
does not call, captured into a CUDA graph at import on buffers of the full shape, so that no call the harness
records ever dispatches it. Public API only, nothing patched.

What stops it where: on the CPU there are no graphs, forward runs aten::gelu eagerly, and the dispatch recorder names
class 9. On a GPU the recorder sees only copy_ and clone; the kernel census (torch.profiler) sees the graph's aten
GELU kernel (`GeluCUDAKernelImpl`). While the census allowed aten kernels by kind this passed on the H200 (2.74x,
bench/harness/isolation/run9/peers); the census now compares aten kernels by what they compute, and no kernel of this
reference computes a GELU: class 9 (recorder.aten_kernel_identity; on the H200: bench/harness/isolation/run10/peers)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

from kernels.problems import new_gelu as problem

_captured = None
if torch.cuda.is_available():
    _shape = (problem.SHAPES["full"]["batch"], problem.SHAPES["full"]["dim"])
    _x = torch.zeros(_shape, device="cuda")
    F.gelu(_x, approximate="tanh")  # compiled and warmed before the capture
    _graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(_graph):
        _y = F.gelu(_x, approximate="tanh")
    _captured = (_graph, _x, _y)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if _captured is not None and x.is_cuda and tuple(x.shape) == tuple(_captured[1].shape):
            graph, static_x, static_y = _captured
            static_x.copy_(x)
            graph.replay()
            return static_y.clone()
        return F.gelu(x, approximate="tanh")
