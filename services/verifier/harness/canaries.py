"""Class 2 defense: sparse, large-valued canaries at secret random positions of an input.

A kernel that reads only part of its input (one row, a subsample of a mean) misses most canaries and lands far
outside the tolerance, while the reference -- which every canaried input is also fed -- stays the judge. Each
problem's canary keeps its math valid: e.g. kl_div gets canaries in the targets (its log never sees them), the
losses get enough canaries to move their mean by far more than rtol.
"""

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class CanarySpec:
    input_index: int
    value: float
    fraction: float  # of the input's elements
    minimum: int = 4


CANARIES = {
    "matmul": CanarySpec(0, 100.0, 1 / 65536),
    "log_softmax": CanarySpec(0, 30.0, 1 / 65536),
    "rms_norm": CanarySpec(0, 100.0, 1 / 65536),
    "layer_norm": CanarySpec(0, 100.0, 1 / 65536),
    "sum_dim": CanarySpec(0, 1000.0, 1 / 65536),
    "new_gelu": CanarySpec(0, 10.0, 1 / 4096),
    "cumsum_reverse": CanarySpec(0, 1000.0, 1 / 65536),
    "cross_entropy": CanarySpec(0, 100.0, 1 / 65536),
    "huber_loss": CanarySpec(0, 1000.0, 1 / 1024),
    "kl_div": CanarySpec(1, 0.5, 1 / 1024),
    "triplet_margin_loss": CanarySpec(1, 100.0, 1 / 8192),
    "hinge_loss": CanarySpec(0, 1000.0, 1 / 1024),
}


def add_canaries(problem_id: str, inputs: list, generator: torch.Generator) -> int:
    """Write canaries into ``inputs`` in place; returns how many were placed (0 for a problem without a spec)."""
    spec = CANARIES.get(problem_id)
    if spec is None:
        return 0
    target = inputs[spec.input_index]
    flat = target.view(-1)
    count = min(flat.numel(), max(spec.minimum, int(flat.numel() * spec.fraction)))
    positions = torch.randint(0, flat.numel(), (count,), generator=generator, device=target.device)
    flat[positions] = spec.value
    return count
