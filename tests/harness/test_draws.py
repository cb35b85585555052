"""Drawing a timed call's inputs into the tensors they are timed from, in place (services/verifier/harness/draws.py,
each problem's ``get_inputs(..., into=)``): the same values as a fresh draw from the same seed, in the same tensors,
whatever those held before. The judge relies on both: it draws a GPU timed call into the candidate's region and, for
a re-check, draws the same seed again into its own memory for the reference."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels import problems
from services.verifier.harness.draws import draw, into_slot

CPU = torch.device("cpu")
seeds = st.integers(0, 2**63 - 1)


@pytest.mark.parametrize("problem_id", problems.PROBLEM_IDS)
@settings(max_examples=8, deadline=None)
@given(seed=seeds, earlier=seeds, canaries=st.booleans())
def test_a_draw_into_earlier_tensors_is_the_fresh_draw_in_those_tensors(problem_id, seed, earlier, canaries):
    problem = problems.load(problem_id)
    into = draw(problem, problem_id, "smoke", CPU, earlier, canaries=True)
    pointers = [t.data_ptr() for t in into]
    fresh = draw(problem, problem_id, "smoke", CPU, seed, canaries)
    drawn = draw(problem, problem_id, "smoke", CPU, seed, canaries, into=into)
    assert all(a is b for a, b in zip(drawn, into, strict=True))
    assert [t.data_ptr() for t in drawn] == pointers
    for value, expected in zip(drawn, fresh, strict=True):
        assert value.dtype == expected.dtype and value.shape == expected.shape
        assert torch.equal(value, expected)


@pytest.mark.parametrize("problem_id", problems.PROBLEM_IDS)
def test_a_slot_keeps_its_tensors_and_bumps_their_version_on_every_draw(problem_id):
    """Nothing about a slot's tensors tells one timed call from the next: the same objects, the same pointers, new
    contents, a version counter moved on as any in-place write moves it."""
    problem = problems.load(problem_id)
    slots: dict = {}
    first = into_slot(slots, 0, problem, problem_id, "smoke", CPU, 1)
    versions = [t._version for t in first]
    second = into_slot(slots, 0, problem, problem_id, "smoke", CPU, 2)
    assert all(a is b for a, b in zip(first, second, strict=True))
    assert all(t._version > v for t, v in zip(second, versions, strict=True))
    earlier = draw(problem, problem_id, "smoke", CPU, 1, True)
    assert not all(torch.equal(a, b) for a, b in zip(second, earlier, strict=True))
