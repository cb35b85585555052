"""Class 2 defense: sparse, large-valued canaries at secret random positions of an input.

A kernel that reads only part of its input (one row, a subsample of a mean) misses canaries and lands far outside
the tolerance, while the reference -- which every canaried input is also fed -- stays the judge.

Two kinds, because the outputs differ:
- problems with one output per row or element (matmul, norms, sum, gelu, cumsum, log_softmax): canaries spread at a
  small fraction of the elements, so that a kernel skipping elements gets the outputs near them wrong;
- the scalar losses: a handful (a secret count from 3 to 9) of canaries, each large enough to move the mean by
  about 0.5 on its own. A spread of many canaries would not do there: a subsample of the rows would see the same
  density of them, and its mean would still land within rtol (seen on the H200 with a 1/8-row hinge_loss).
Each keeps the reference's math valid: kl_div gets its canaries in the targets (its log never sees them),
hinge_loss's carry the sign that makes ``1 - prediction * target`` large.
"""

from collections.abc import Callable

import torch

FEW_CANARIES = (3, 9)  # inclusive range of the secret count for the scalar losses


def _positions(target: torch.Tensor, count: int, generator: torch.Generator) -> torch.Tensor:
    return torch.randint(0, target.numel(), (count,), generator=generator, device=target.device)


def _spread(index: int, value: float, fraction: float, minimum: int = 4):
    def place(inputs: list, generator: torch.Generator) -> int:
        flat = inputs[index].view(-1)
        count = min(flat.numel(), max(minimum, int(flat.numel() * fraction)))
        flat[_positions(flat, count, generator)] = value
        return count

    return place


def _few_count(generator: torch.Generator, device) -> int:
    low, high = FEW_CANARIES
    return int(torch.randint(low, high + 1, (1,), generator=generator, device=device))


def _few(index: int, value_for: Callable[[torch.Tensor], float]):
    def place(inputs: list, generator: torch.Generator) -> int:
        target = inputs[index]
        count = _few_count(generator, target.device)
        target.view(-1)[_positions(target, count, generator)] = value_for(target)
        return count

    return place


def _hinge(inputs: list, generator: torch.Generator) -> int:
    predictions, targets = inputs
    count = _few_count(generator, predictions.device)
    positions = _positions(predictions, count, generator)
    size = 0.5 * predictions.numel()
    columns = positions % predictions.shape[-1]
    predictions.view(-1)[positions] = -size * targets[columns]  # 1 - p * t = 1 + size, whatever the target's sign
    return count


CANARIES: dict[str, Callable[[list, torch.Generator], int]] = {
    "matmul": _spread(0, 100.0, 1 / 65536),
    "log_softmax": _spread(0, 30.0, 1 / 65536),
    "rms_norm": _spread(0, 100.0, 1 / 65536),
    "layer_norm": _spread(0, 100.0, 1 / 65536),
    "sum_dim": _spread(0, 1000.0, 1 / 65536),
    "new_gelu": _spread(0, 10.0, 1 / 4096),
    "cumsum_reverse": _spread(0, 1000.0, 1 / 65536),
    # one canary moves each mean by about 0.5 (or more): value ~ the number of terms the mean divides by
    "cross_entropy": _few(0, lambda t: t.shape[0] + 50.0),
    "huber_loss": _few(0, lambda t: 0.5 * t.numel()),
    "kl_div": _few(1, lambda t: 0.05 * t.shape[0] + 1.0),
    "triplet_margin_loss": _few(1, lambda t: 0.5 * t.shape[0] + 10.0),
    "hinge_loss": _hinge,
}


def add_canaries(problem_id: str, inputs: list, generator: torch.Generator) -> int:
    """Write canaries into ``inputs`` in place; returns how many were placed (0 for a problem without any)."""
    place = CANARIES.get(problem_id)
    return place(inputs, generator) if place is not None else 0
