"""Inputs and parameters as pure functions of a seed: the judge and the candidate process each draw the same ones
from the seeds the judge picks (and sends only when it is time to use them)."""

import torch

from services.verifier.harness.canaries import add_canaries


def seeded(device: torch.device, seed: int) -> torch.Generator:
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    return generator


def draw(
    problem, problem_id: str, shape: str, device: torch.device, seed: int, canaries: bool, into: list | None = None
) -> list:
    """One call's inputs; set 0 of the correctness runs is plain, the others (and every timed call) carry canaries.
    ``into``: the tensors of an earlier draw of the problem, drawn into in place (the same values as a fresh draw)."""
    generator = seeded(device, seed)
    inputs = problem.get_inputs(shape, device=device, generator=generator, into=into)
    if canaries:
        add_canaries(problem_id, inputs, generator)
    return inputs


def into_slot(slots: dict, key, problem, problem_id: str, shape: str, device: torch.device, seed: int) -> list:
    """A timed call's inputs, drawn from ``seed`` into the slot's tensors in place (the same pointers, new contents, a
    bumped version counter: nothing about them tells one call from another), or fresh where the slot is new."""
    slots[key] = draw(problem, problem_id, shape, device, seed, True, into=slots.get(key))
    return slots[key]


def randomize(model: torch.nn.Module, seed: int) -> None:
    """Every floating parameter and buffer uniform in [-1, 1): no default (weight 1, bias 0) survives (class 10)."""
    generator = None
    with torch.no_grad():
        for tensor in list(model.parameters()) + list(model.buffers()):
            if tensor.is_floating_point():
                if generator is None:
                    generator = seeded(tensor.device, seed)
                value = torch.rand(tensor.shape, generator=generator, device=tensor.device, dtype=tensor.dtype)
                tensor.copy_(value * 2 - 1)
