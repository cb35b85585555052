"""What scores a timed call under version 2 (gated.scored_ms), judged again on the calls recorded on a real GPU
(bench/harness/v2/run1: an H100, the bundled route, three checks): honest calls pass the judge's bound, lies do not."""

import json
import statistics
from pathlib import Path

import pytest

from services.verifier.harness import gated
from services.verifier.harness.gated import GatedCall, scored_ms

RUN1 = Path(__file__).resolve().parents[2] / "bench" / "harness" / "v2" / "run1"


def recorded_problems():
    for name in ("direct.json", "service_1.json", "service_2.json"):
        doc = json.loads((RUN1 / name).read_text())
        for problem, details in doc["details"].items():
            if details.get("calls_us"):
                calls = [GatedCall(r / 1e3, j / 1e3, late / 1e3, 0.0, False) for r, j, late in details["calls_us"]]
                yield f"{name}:{problem}", calls


PROBLEMS = dict(recorded_problems())


def test_the_record_holds_every_judged_problem_of_three_checks():
    assert len(PROBLEMS) == 33


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_an_honest_problems_calls_stay_within_the_judges_bound(name):
    calls = PROBLEMS[name]
    short = [scored_ms(call, "gpu")[1] for call in calls]
    assert sum(short) <= gated.DISAGREEING_SHARE * len(calls)
    assert statistics.median(c.late_ms for c in calls) <= gated.LATE_MEDIAN_LIMIT_MS["gpu"]


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_a_lie_past_the_slack_is_scored_by_the_judge_and_on_every_call_named(name):
    """Reporting twice the slack less (15 µs + 1 % of the call, doubled) on every fifth call: each such call scores the
    judge's clock, so the median gains nothing from them; on every call, class 6."""
    calls = PROBLEMS[name]

    def lie(c: GatedCall) -> float:
        return c.reported_ms - 2 * (gated.BOUND_SLACK_MS["gpu"] + gated.BOUND_SLACK_SHARE["gpu"] * c.reported_ms)

    lied = [
        GatedCall(lie(c) if i % 5 == 0 else c.reported_ms, c.judged_ms, c.late_ms, 0.0, False)
        for i, c in enumerate(calls)
    ]
    scored = [scored_ms(c, "gpu") for c in lied]
    for i, (ms, short) in enumerate(scored):
        if i % 5 == 0 and short:
            assert ms == max(lied[i].judged_ms, 0.0)
    all_lied = [GatedCall(lie(c), c.judged_ms, c.late_ms, 0.0, False) for c in calls]
    assert sum(scored_ms(c, "gpu")[1] for c in all_lied) > gated.DISAGREEING_SHARE * len(calls)
