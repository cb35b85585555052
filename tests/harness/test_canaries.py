"""The canaries must move every scalar output far beyond the tolerance (else a subsampling kernel would pass), and
must keep every reference's math valid (no NaN or inf)."""

import pytest
import torch

from kernels import problems
from kernels.problems import hinge_loss
from services.verifier.harness.canaries import FEW_CANARIES, add_canaries


@pytest.mark.parametrize("problem_id", problems.PROBLEM_IDS)
def test_canaries_keep_the_reference_finite_and_change_its_answer(problem_id):
    problem = problems.load(problem_id)
    model = problem.Model(*problem.get_init_inputs("smoke"))
    generator = torch.Generator().manual_seed(1234)
    plain = problem.get_inputs("smoke", generator=generator)
    canaried = [t.clone() for t in plain]
    placed = add_canaries(problem_id, canaried, generator)
    assert placed >= FEW_CANARIES[0]
    with torch.no_grad():
        before, after = model(*plain), model(*canaried)
    assert torch.isfinite(after).all()
    if after.numel() == 1:
        tolerance = 0.01 + 0.01 * abs(float(after))
        assert abs(float(after) - float(before)) > 10 * tolerance
    else:
        assert not torch.allclose(after, before, atol=0.01, rtol=0.01)


def test_a_row_subsample_of_a_mean_fails_at_a_size_where_a_dense_spread_of_canaries_would_not(monkeypatch):
    """The H200 run's lesson: at 1e9 elements, a 1/8-row hinge_loss passed canaries spread at 1/1024 of the
    elements. With a few large canaries it must fail on every canaried input, here at 8192 x 8192 (where canaries
    spread at 1/1024 let it pass 5 times out of 5)."""
    monkeypatch.setitem(hinge_loss.SHAPES, "medium", {"batch": 8192})
    model = hinge_loss.Model()
    failures = 0
    for seed in range(3):
        generator = torch.Generator().manual_seed(seed)
        inputs = hinge_loss.get_inputs("medium", generator=generator)
        add_canaries("hinge_loss", inputs, generator)
        predictions, targets = inputs
        expected = model(predictions, targets)
        subsample = torch.mean(torch.clamp(1 - predictions[::8] * targets, min=0))
        failures += not torch.allclose(subsample, expected, atol=0.01, rtol=0.01)
    assert failures == 3
