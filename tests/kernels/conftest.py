"""Kernel tests run under Triton's CPU interpreter, in fp32, at small and awkward shapes.

TRITON_INTERPRET must be set before a route module decorates its kernels; it is set here, at collection, and the
tests' ``load_route`` reloads a route module that some earlier import decorated without it.
"""

import os

os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402


@pytest.fixture
def gen() -> torch.Generator:
    """A fresh seeded generator per test: random inputs, reproducible failures."""
    return torch.Generator().manual_seed(20261202)
