"""The canaries must move every scalar output far beyond the tolerance (else a subsampling kernel would pass), and
must keep every reference's math valid (no NaN or inf)."""

import pytest
import torch

from kernels import problems
from services.verifier.harness.canaries import CANARIES, add_canaries


@pytest.mark.parametrize("problem_id", problems.PROBLEM_IDS)
def test_canaries_keep_the_reference_finite_and_change_its_answer(problem_id):
    problem = problems.load(problem_id)
    model = problem.Model(*problem.get_init_inputs("smoke"))
    generator = torch.Generator().manual_seed(1234)
    plain = problem.get_inputs("smoke", generator=generator)
    canaried = [t.clone() for t in plain]
    placed = add_canaries(problem_id, canaried, generator)
    assert placed >= CANARIES[problem_id].minimum
    with torch.no_grad():
        before, after = model(*plain), model(*canaried)
    assert torch.isfinite(after).all()
    if after.numel() == 1:
        tolerance = 0.01 + 0.01 * abs(float(before))
        assert abs(float(after) - float(before)) > 10 * tolerance
    else:
        assert not torch.allclose(after, before, atol=0.01, rtol=0.01)
