"""Every route file against its reference at the smoke shape, and against a float64 oracle."""

import importlib

import pytest
import torch

from kernels.problems import PROBLEM_IDS


def load_route(problem_id: str):
    """The route module, decorated under the interpreter (reloaded if an earlier import decorated it without)."""
    module = importlib.import_module(f"kernels.triton.{problem_id}")
    if not module._INTERPRET:
        module = importlib.reload(module)
    return module


def load_problem(problem_id: str):
    return importlib.import_module(f"kernels.problems.{problem_id}")


def _models(problem_id: str, gen: torch.Generator):
    problem = load_problem(problem_id)
    route = load_route(problem_id)
    init = problem.get_init_inputs("smoke")
    ref = problem.Model(*init)
    with torch.no_grad():  # random parameters, so that an ignored weight or bias shows
        for p in ref.parameters():
            p.copy_(torch.randn(p.shape, generator=gen))
    ours = route.ModelNew(*init)
    ours.load_state_dict(ref.state_dict(), strict=True)
    return problem, ref, ours


def _rel_err(out: torch.Tensor, oracle: torch.Tensor) -> float:
    return ((out.double() - oracle).norm() / oracle.norm()).item()


@pytest.mark.parametrize("problem_id", PROBLEM_IDS)
def test_matches_reference_and_oracle(problem_id, gen):
    problem, ref, ours = _models(problem_id, gen)
    inputs = problem.get_inputs("smoke", generator=gen)
    before = [x.clone() for x in inputs]
    with torch.no_grad():
        expected = ref(*inputs)
        out = ours(*inputs)
        oracle = ref.double()(*[x.double() if x.is_floating_point() else x for x in inputs])
    assert out.shape == expected.shape and out.dtype == torch.float32
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)
    # fp32 semantics: as close to the float64 oracle as the fp32 reference is (within 2x, or fp32 rounding)
    assert _rel_err(out, oracle) <= max(2 * _rel_err(expected, oracle), 2.0**-23)
    assert all(torch.equal(a, b) for a, b in zip(before, inputs, strict=True)), "inputs were modified"


@pytest.mark.parametrize("problem_id", PROBLEM_IDS)
def test_fresh_inputs_give_fresh_outputs(problem_id, gen):
    """No caching on shapes or pointers: a second draw of the same shape gives that draw's answer."""
    problem, ref, ours = _models(problem_id, gen)
    with torch.no_grad():
        for _ in range(2):
            inputs = problem.get_inputs("smoke", generator=gen)
            torch.testing.assert_close(ours(*inputs), ref(*inputs), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("problem_id", PROBLEM_IDS)
def test_every_launch_variant_is_right(problem_id, gen):
    """The GPU launch variants (block sizes, warps, chunking) compute the same function under the interpreter.

    Cooperative variants (log_softmax, layer_norm) that split a row over several programs are left out: their
    programs wait for each other, and the interpreter runs programs one after another.
    """
    problem, ref, ours = _models(problem_id, gen)
    route = load_route(problem_id)
    inputs = problem.get_inputs("smoke", generator=gen)
    programs_per_row = getattr(route, "programs_per_row", lambda cfg, cols: 1)
    with torch.no_grad():
        expected = ref(*inputs)
        for name, cfg in route.VARIANTS.items():
            if programs_per_row(cfg, inputs[0][0].numel()) > 1:
                continue
            if cfg.get("autotune"):  # autotuning needs a GPU; the interpreter runs the fixed configs
                continue
            ours.variant = name
            torch.testing.assert_close(ours(*inputs), expected, rtol=1e-4, atol=1e-5, msg=f"variant {name}")


def test_layer_norm_uses_its_parameters(gen):
    """y = n * weight + bias: doubling the weight and adding 1 to the bias must move the output accordingly."""
    problem, _, ours = _models("layer_norm", gen)
    (x,) = problem.get_inputs("smoke", generator=gen)
    bias = ours.ln.bias.detach().clone()
    with torch.no_grad():
        first = ours(x)
        ours.ln.weight.mul_(2.0)
        ours.ln.bias.add_(1.0)
        second = ours(x)
    torch.testing.assert_close(second, 2 * (first - bias) + bias + 1.0, rtol=1e-5, atol=1e-5)
    assert set(dict(ours.named_parameters())) == {"ln.weight", "ln.bias"}
