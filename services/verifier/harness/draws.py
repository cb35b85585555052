"""Inputs and parameters as pure functions of a seed: the judge and the candidate process each draw the same ones
from the seeds the judge picks (and sends only when it is time to use them)."""

import torch

from services.verifier.harness.canaries import add_canaries


def seeded(device: torch.device, seed: int) -> torch.Generator:
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    return generator


def draw(problem, problem_id: str, shape: str, device: torch.device, seed: int, canaries: bool) -> list:
    """One call's inputs; set 0 of the correctness runs is plain, the others (and every timed call) carry canaries."""
    generator = seeded(device, seed)
    inputs = problem.get_inputs(shape, device=device, generator=generator)
    if canaries:
        add_canaries(problem_id, inputs, generator)
    return inputs


def into_slot(slots: dict, key, fresh: list) -> list:
    """A timed call's inputs: the slot's tensors with the fresh draw's contents copied in (the same pointers, new
    contents, a bumped version counter: nothing about them tells one call from another), or the fresh draw itself
    where the slot is new."""
    slot = slots.setdefault(key, fresh)
    if slot is not fresh:
        for target, source in zip(slot, fresh, strict=True):
            if isinstance(target, torch.Tensor):
                target.copy_(source)
    return slot


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
