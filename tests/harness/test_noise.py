"""The check's own noise: bootstrap intervals of a speed-up and of the score (services/verifier/harness/noise.py)."""

import math
import random

from services.verifier.harness import noise


def calls(center: float, spread: float, n: int = 100, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [center * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


def test_a_speedup_interval_holds_the_speedup_and_narrows_with_less_noise():
    rng = random.Random(7)
    reference, quiet, loud = calls(10.0, 0.01, seed=2), calls(2.0, 0.01, seed=3), calls(2.0, 0.2, seed=4)
    low, high = noise.speedup_interval(reference, quiet, rng)
    assert low <= 5.0 <= high or abs(low - 5.0) < 0.05
    loud_low, loud_high = noise.speedup_interval(reference, loud, rng)
    assert (high - low) < (loud_high - loud_low)
    assert high - low < 0.1 * 5.0


def test_the_score_interval_is_of_the_geometric_mean_and_counts_a_fixed_speedup():
    rng = random.Random(11)
    problems = [(calls(4.0, 0.02, seed=5), calls(1.0, 0.02, seed=6)), 1.0]
    low, high = noise.score_interval(problems, rng, resamples=400)
    assert low <= high
    assert math.isclose(math.sqrt(4.0), (low + high) / 2, rel_tol=0.03)


def test_identical_calls_have_no_spread():
    rng = random.Random(3)
    assert noise.speedup_interval([2.0] * 10, [1.0] * 10, rng, resamples=50) == (2.0, 2.0)
    assert noise.relative_spread([1.0] * 5) == 0.0
    assert noise.relative_spread([1.0]) == 0.0
