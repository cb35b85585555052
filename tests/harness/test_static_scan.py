import pytest

from services.verifier.harness.static_scan import scan_source

HONEST = """
import math
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pass


@triton.autotune(configs=[], key=["n"])
@triton.jit
def tuned_kernel(x_ptr, n):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        add_kernel[(1,)](x, x.numel(), BLOCK=128)
        return out.view(x.shape)
"""


def test_honest_triton_file_is_clean_and_its_kernels_are_listed():
    result = scan_source(HONEST, "new_gelu.py")
    assert result.violations == []
    assert result.triton_kernels == {"add_kernel", "tuned_kernel"}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import subprocess", "class 11"),
        ("import numpy as np", "class 11"),
        ("from cupy import asarray", "class 11"),
        ("import ctypes", "class 11"),
        ("import threading", "class 5"),
        ("from concurrent.futures import ThreadPoolExecutor", "class 5"),
        ("import multiprocessing", "class 5"),
        ("import socket", "class 6"),
        ("import gc", "class 6"),
        ("import sys", "class 6"),
        ("from services.verifier.harness import integrity", "class 6"),
        ("import torch\ns = torch.cuda.Stream()", "class 5"),
        ("import torch\nwith torch.cuda.stream(s):\n    pass", "class 5"),
        ("import torch\ntorch.backends.cuda.matmul.allow_tf32 = True", "class 8"),
        ("import torch\ntorch.set_float32_matmul_precision('high')", "class 8"),
        ("import torch\ntorch.allclose = lambda *a, **k: True", "class 6"),
        ("import time\ntime.perf_counter = lambda: 0.0", "class 6"),
        ("import os\nos.system('nvidia-smi')", "class 11"),
        ("y = x.cpu()", "class 11"),
        ("y = x.numpy()", "class 11"),
        ("open('metrics.json', 'w')", "class 6"),
        ("setattr(torch, 'allclose', f)", "class 6"),
        ("f = fn.__globals__", "class 6"),
        ("lib.cudaDeviceSetLimit(6, 1 << 25)", "class 7"),
        ("import torch\nf = torch.compile(g)", "class 9"),
        ("from torch.utils.cpp_extension import load_inline", "class 9"),
        ("import torch\nwatched = torch._C._get_dispatch_mode(None)", "class 6"),
        ("import torch\nif torch.autograd.profiler._is_profiler_enabled:\n    pass", "class 6"),
        ("from torch.utils._python_dispatch import _get_current_dispatch_mode", "class 6"),
        ("import torch.nn.functional as F\nF._in_projection", "class 6"),
        ("import torch\nc = getattr(torch, '_' + 'C')", "class 6"),
        ("import torch\nc = getattr(torch, '_C')", "class 6"),
    ],
)
def test_forbidden_imports_and_calls_name_their_class(source, expected):
    violations = scan_source(source, "route.py").violations
    assert violations, source
    assert any(v.startswith(expected) for v in violations), violations
    assert all("route.py:" in v for v in violations)


def test_a_file_that_does_not_parse_is_reported():
    assert scan_source("def broken(:\n", "matmul.py").violations[0].startswith("route: matmul.py:1 does not parse")
