"""The 12 reference operators of KernelBench operators (verifier version 1).

Each module follows the KernelBench convention -- ``Model``, ``get_inputs()``, ``get_init_inputs()`` -- and adds:

- ``KERNELBENCH_NAME``: the KernelBench level-1 file the problem comes from.
- ``SHAPES``: ``{"full": {...}, "smoke": {...}}``; full is KernelBench's shape, smoke a small awkward one for CPU tests.
- ``get_inputs(shape="full", device="cpu", generator=None, into=None)``: fresh random inputs as the benchmark draws
  them; ``into``, the tensors of an earlier draw, to draw into in place instead (the same values, ``_draw``).
- ``get_init_inputs(shape="full")``: the constructor's arguments, the same for ``Model`` and a route's ``ModelNew``.
- ``H200_MS``: eager, torch.compile and bandwidth-floor milliseconds measured on the pinned H200 (BENCHMARK.md).
- ``floor_bytes(shape)``: the fewest bytes the problem must move (inputs read once, output written once).
- ``FORWARD_TEMPORARIES`` and ``ORACLE_SLICES``: what the memory plan (``memory.py``) counts of the reference beyond
  its inputs and output, and the dims the float64 oracle may be computed in slices along (None: it reduces over all).
"""

import importlib
from types import ModuleType

PROBLEM_IDS = (
    "matmul",
    "log_softmax",
    "rms_norm",
    "layer_norm",
    "sum_dim",
    "new_gelu",
    "cumsum_reverse",
    "cross_entropy",
    "huber_loss",
    "kl_div",
    "triplet_margin_loss",
    "hinge_loss",
)


def load(problem_id: str) -> ModuleType:
    """The reference module of one problem; ValueError names an unknown id."""
    if problem_id not in PROBLEM_IDS:
        raise ValueError(f"unknown problem {problem_id!r}; known: {', '.join(PROBLEM_IDS)}")
    return importlib.import_module(f"kernels.problems.{problem_id}")
