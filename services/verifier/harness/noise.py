"""What a check's own noise says about its numbers (issue 36, item 8): NVBench's robust compare, applied to a board.

A speed-up is the median of the reference's timed calls over the median of the candidate's. Resampling each side's
calls with replacement (a bootstrap) and taking the same ratio many times gives the spread that ratio would have had
with other draws of the same calls; the central 95 % of it is the interval. The score's interval resamples every
problem's calls together and takes the geometric mean each time, so that it is the interval of the number the board
ranks. Two routes whose intervals overlap are tied: which is faster is inside the noise.

Pure functions of lists of milliseconds, the standard library only: the harness runs where torch is the only extra.
"""

import math
import random
import statistics
from collections.abc import Sequence

RESAMPLES = 1000
CONFIDENCE = 0.95


def _median_of_resample(values: Sequence[float], rng: random.Random) -> float:
    return statistics.median(rng.choices(values, k=len(values)))


def _interval(samples: list[float], around: float) -> tuple[float, float]:
    """The central CONFIDENCE of the samples, widened where needed to hold the value itself (a median's bootstrap can
    leave it just outside; the metrics contract wants low <= value <= high)."""
    ordered = sorted(samples)
    tail = (1.0 - CONFIDENCE) / 2
    low = ordered[int(math.floor(tail * (len(ordered) - 1)))]
    high = ordered[int(math.ceil((1.0 - tail) * (len(ordered) - 1)))]
    return min(low, around), max(high, around)


def relative_spread(values: Sequence[float]) -> float:
    """Relative standard deviation of a problem's timed calls (0 for fewer than two)."""
    if len(values) < 2:
        return 0.0
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean if mean > 0 else 0.0


def speedup_interval(
    reference_ms: Sequence[float], candidate_ms: Sequence[float], rng: random.Random, resamples: int = RESAMPLES
) -> tuple[float, float]:
    """The central 95 % of median(reference) / median(candidate) over bootstrap resamples of both sides' calls."""
    ratios = []
    for _ in range(resamples):
        candidate = _median_of_resample(candidate_ms, rng)
        ratios.append(_median_of_resample(reference_ms, rng) / candidate if candidate > 0 else 0.0)
    candidate = statistics.median(candidate_ms)
    return _interval(ratios, statistics.median(reference_ms) / candidate if candidate > 0 else 0.0)


def score_interval(
    problems: Sequence[tuple[Sequence[float], Sequence[float]] | float],
    rng: random.Random,
    resamples: int = RESAMPLES,
) -> tuple[float, float]:
    """The central 95 % of the geometric mean of every problem's speed-up over joint bootstrap resamples. Each item is
    (reference calls, candidate calls), or a fixed speed-up (a problem not submitted counts as exactly 1)."""
    scores = []
    logs_of_value = 0.0
    for item in problems:
        if isinstance(item, (int, float)):
            logs_of_value += math.log(float(item)) if item > 0 else -math.inf
        else:
            reference, candidate = item
            median_candidate = statistics.median(candidate)
            ratio = statistics.median(reference) / median_candidate if median_candidate > 0 else 0.0
            logs_of_value += math.log(ratio) if ratio > 0 else -math.inf
    value = math.exp(logs_of_value / len(problems)) if problems and logs_of_value != -math.inf else 0.0
    for _ in range(resamples):
        logs = 0.0
        for item in problems:
            if isinstance(item, (int, float)):
                speedup = float(item)
            else:
                reference, candidate = item
                median_candidate = _median_of_resample(candidate, rng)
                speedup = _median_of_resample(reference, rng) / median_candidate if median_candidate > 0 else 0.0
            if speedup <= 0:
                logs = -math.inf
                break
            logs += math.log(speedup)
        scores.append(math.exp(logs / len(problems)) if problems and logs != -math.inf else 0.0)
    return _interval(scores, value)
