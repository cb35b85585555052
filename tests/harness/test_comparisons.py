"""The judge's comparisons of a candidate's output with the reference's, at any size: a full-shape output is
gigabytes (rms_norm's 7.5 GB), so no comparison may make a temporary of the output's size. On an 80 GB H100 the
judge's unchunked max-abs-error ran out of device memory at rms_norm in every check (docs/decisions/0007).
"""

import math
from types import SimpleNamespace

import pytest
import torch

from services.verifier.harness import compare
from services.verifier.harness.device import POISON
from tests.support.torch_modes import LargestNewTensor

CHUNK = 100
SIZE = 1000


def rules() -> SimpleNamespace:
    """What of the rules the comparisons read: the tolerances."""
    return SimpleNamespace(atol=1e-2, rtol=1e-2)


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(compare, "COMPARE_CHUNK", CHUNK)


def wrong_output() -> tuple[torch.Tensor, torch.Tensor]:
    expected = torch.linspace(-1, 1, SIZE).reshape(10, 100)
    out = expected.clone()
    out[3, 7] += 0.5  # the largest error
    out[9, 99] -= 0.25
    out[5, 0] = float("nan")
    return out, expected


def test_the_max_abs_error_makes_no_temporary_of_the_outputs_size(small_chunks):
    out, expected = wrong_output()
    out[5, 0] = 0.0
    with LargestNewTensor(out, expected) as mode:
        error = compare.max_abs_error(out, expected)
    assert error == pytest.approx(0.5)
    assert mode.largest <= CHUNK


def test_nan_and_infinite_outputs_leave_the_max_abs_error_finite(small_chunks):
    """The metrics file's numbers must be finite (contracts/metrics.py refuses the file otherwise): the error is the
    largest finite one, and the mismatch counts the rest."""
    out, expected = wrong_output()
    out[0, 0] = float("inf")
    error = compare.max_abs_error(out, expected)
    assert error == pytest.approx(0.5)
    assert math.isfinite(error)
    fault = compare.output_faults(out, expected, rules())
    assert "1 NaN, 1 infinite" in fault, fault


def test_a_mismatch_is_counted_over_every_chunk_without_a_temporary_of_the_outputs_size(small_chunks):
    out, expected = wrong_output()
    with LargestNewTensor(out, expected) as mode:
        fault = compare.output_faults(out, expected, rules())
    assert fault.startswith("class 2 (partial work or wrong result): 3 of 1000 output elements outside"), fault
    assert "(max abs error 0.5 over the finite ones, 1 NaN, 0 infinite)" in fault, fault
    assert mode.largest <= CHUNK


def test_an_output_of_poison_is_named_as_memory_the_candidate_never_wrote(small_chunks):
    expected = torch.linspace(-1, 1, SIZE)
    out = expected.clone()
    out[SIZE - 5 :] = POISON  # in the last chunk only
    with LargestNewTensor(out, expected) as mode:
        fault = compare.output_faults(out, expected, rules())
    assert fault.startswith("class 1 (reused freed memory) or class 2 (partial work): 5 of 1000 output"), fault
    assert mode.largest <= CHUNK


def test_a_matching_output_and_an_empty_one_have_no_fault(small_chunks):
    expected = torch.linspace(-1, 1, SIZE)
    assert compare.output_faults(expected + 1e-4, expected, rules()) is None
    assert compare.output_faults(torch.empty(0), torch.empty(0), rules()) is None
    error = max(compare.max_abs_error(expected + 1e-4, expected), compare.max_abs_error(torch.empty(0), torch.empty(0)))
    assert error == pytest.approx(1e-4, rel=0.1)
