"""contracts.metrics: one parser, two declared profiles. What both require is the same; the profiles differ only in
what subtasks may be and whether the verdict fields are read."""

import json

import pytest

from contracts import metrics
from contracts.metrics import CHECK, REPORT, MetricsError

BOTH = pytest.mark.parametrize("profile", [CHECK, REPORT], ids=["check", "report"])


def problem(text, profile) -> str:
    with pytest.raises(MetricsError) as caught:
        metrics.parse(text, profile)
    return str(caught.value)


@BOTH
@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("{", "not valid JSON"),
        ("[" * 100_000, "not valid JSON: nested too deeply"),
        ("[]", "must be a JSON object with score, cost and subtasks, got list"),
        ('{"cost": 1, "subtasks": []}', "score: required field missing"),
        ('{"score": 1, "cost": 1}', "subtasks: required field missing"),
        ('{"score": true, "cost": 1, "subtasks": []}', "score: must be a number, got bool"),
        ('{"score": 1, "cost": -1, "subtasks": []}', "cost: must be a finite number >= 0, got -1"),
        ('{"score": 1e999, "cost": 1, "subtasks": []}', "score: must be a finite number >= 0, got inf"),
        ('{"score": 1, "cost": 1, "subtasks": "fast"}', "subtasks: must be a list"),
    ],
)
def test_what_both_profiles_require(profile, document, message):
    assert problem(document, profile).startswith(message)


@BOTH
def test_the_size_limit(profile):
    huge = json.dumps({"score": 1, "cost": 1, "subtasks": [], "pad": "x" * metrics.MAX_BYTES})
    assert problem(huge, profile).endswith(f"over the {metrics.MAX_BYTES}-byte limit")


def test_a_report_keeps_its_own_subtasks_and_reads_no_verdict():
    text = json.dumps({"score": 1.5, "cost": 2, "subtasks": {"matmul": [1, 2]}, "passed": "maybe"})
    reported = metrics.parse(text, REPORT)
    assert (reported.score, reported.cost, reported.subtasks, reported.passed) == (1.5, 2.0, {"matmul": [1, 2]}, None)


def test_a_check_reads_subtasks_and_the_verdict():
    text = json.dumps(
        {
            "score": 1.25,
            "cost": 3,
            "subtasks": [{"id": "matmul", "speedup": 1.25, "violations": ["v" * 600]}],
            "passed": True,
            "verified": False,
            "reasons": [],
            "not_verified_because": ["CPU profile"],
            "runner": "cpu",
        }
    )
    checked = metrics.parse(text, CHECK)
    assert (checked.score, checked.passed, checked.verified, checked.runner) == (1.25, True, False, "cpu")
    assert checked.subtasks[0].id == "matmul" and len(checked.subtasks[0].violations[0]) == metrics.MAX_TEXT
    assert checked.not_verified_because == ("CPU profile",)
    unsure = text.replace('"passed": true', '"passed": "yes"')
    assert problem(unsure, CHECK) == "passed: must be true or false, got 'yes'"
    assert problem('{"score": 1, "cost": 1, "subtasks": {"a": 1}}', CHECK) == "subtasks: must be a list, got dict"
    assert problem('{"score": 1, "cost": 1, "subtasks": [{}]}', CHECK) == "subtasks[0].id: required"


def test_the_harness_stamps_the_one_verifier_version():
    from services.verifier.harness import check

    assert check.VERIFIER_VERSION is metrics.VERIFIER_VERSION == 2


BASE = {"score": 2.0, "cost": 1, "subtasks": []}


@BOTH
def test_a_score_interval_is_read_when_it_holds_the_score(profile):
    parsed = metrics.parse(json.dumps({**BASE, "score_interval": [1.9, 2.1]}), profile)
    assert (parsed.score_low, parsed.score_high) == (1.9, 2.1)
    none = metrics.parse(json.dumps(BASE), profile)
    assert (none.score_low, none.score_high) == (0.0, 0.0)


@BOTH
@pytest.mark.parametrize(
    ("noise", "message"),
    [
        ([2.1, 2.3], "score_interval: must hold its value, 0 <= low <= 2.0 <= high, got [2.1, 2.3]"),
        ([1.0, 1.9], "score_interval: must hold its value"),
        ([2.1, 1.9], "score_interval: must hold its value"),
        ([-1, 3], "score_interval: must hold its value"),
        ([1.9], "score_interval: must be [low, high], got [1.9]"),
        ([1, 2, 3], "score_interval: must be [low, high]"),
        ({"low": 1}, "score_interval: must be [low, high]"),
        ("1.9-2.1", "score_interval: must be [low, high]"),
        ([True, 3], "score_interval: low and high must be finite numbers"),
        ([1.9, "2.1"], "score_interval: low and high must be finite numbers"),
        ([1.9, 1e999], "score_interval: low and high must be finite numbers"),
        ([None, 2.1], "score_interval: low and high must be finite numbers"),
    ],
)
def test_a_hostile_score_interval_is_named(profile, noise, message):
    assert problem(json.dumps({**BASE, "score_interval": noise}), profile).startswith(message)
    # NaN is not JSON's, but Python's json reads it: refused alike
    assert problem('{"score": 2, "cost": 1, "subtasks": [], "score_interval": [NaN, 3]}', profile).startswith(
        "score_interval: low and high must be finite numbers"
    )


def test_a_check_reads_each_problems_noise_and_its_timing_protocol():
    subtask = {"id": "matmul", "speedup": 1.5, "speedup_interval": [1.45, 1.52], "candidate_rsd": 0.004}
    text = json.dumps({**BASE, "subtasks": [subtask], "timing_protocol": "cold-device-blocking"})
    checked = metrics.parse(text, CHECK)
    read = checked.subtasks[0]
    assert (read.speedup_low, read.speedup_high, read.candidate_rsd) == (1.45, 1.52, 0.004)
    assert checked.timing_protocol == "cold-device-blocking"
    assert metrics.parse(json.dumps(BASE), CHECK).timing_protocol == ""

    def refused(**change) -> str:
        return problem(json.dumps({**BASE, "subtasks": [{**subtask, **change}]}), CHECK)

    assert refused(speedup_interval=[1.6, 1.7]).startswith("subtasks[0].speedup_interval: must hold its value")
    assert refused(speedup_interval=[1.4]).startswith("subtasks[0].speedup_interval: must be [low, high]")
    assert refused(speedup_low=1.0).startswith("subtasks[0].speedup_low: not read; write speedup_interval")
    assert refused(candidate_rsd=-0.1) == "subtasks[0].candidate_rsd: must be a finite number >= 0"
    assert refused(candidate_rsd="Infinity") == "subtasks[0].candidate_rsd: must be a finite number >= 0"
    assert problem(json.dumps({**BASE, "timing_protocol": "warm"}), CHECK).startswith(
        "timing_protocol: must be one of cold-host-launch, cold-device-blocking"
    )
    assert problem(json.dumps({**BASE, "timing_protocol": 2}), CHECK) == "timing_protocol: must be a string, got int"


def test_a_report_says_where_when_and_under_which_rules_it_was_measured():
    document = {"score": 3.7, "cost": 22.7, "subtasks": [], "report": {"runner": "NVIDIA H200", "measured_at": "2026"}}
    parsed = metrics.parse(json.dumps(document), REPORT)
    assert (parsed.runner, parsed.measured_at, parsed.rules_commit) == ("NVIDIA H200", "2026", "")
    for report, field in (
        ([], "report"),
        ({"runner": "two\nlines"}, "report.runner"),
        ({"measured_at": 3}, "report.measured_at"),
        ({"rules_commit": "x" * 101}, "report.rules_commit"),
    ):
        with pytest.raises(MetricsError, match=field):
            metrics.parse(json.dumps({**document, "report": report}), REPORT)


def test_the_largest_check_file_still_fits_the_event_it_becomes():
    """64 subtasks, each with a long id, 25 violations of 500 four-byte characters and a reason it was not judged as
    long (a 3.4 MB file, under the file limit): what the parser keeps fits
    CheckCompleted.subtasks' limit at append, so a hostile or verbose check is recorded, not refused by the log."""
    from kernelboard.v1 import events_pb2

    from contracts import limits

    wide = "\U0001f600" * metrics.MAX_TEXT
    text = json.dumps(
        {
            "score": 1,
            "cost": 1,
            "subtasks": [
                {
                    "id": wide,
                    "violations": [wide] * 25,
                    "speedup": 1.0,
                    "not_judged": wide,
                    "peak_device_bytes": {"judge": metrics.MAX_PEAK_BYTES, "candidate": metrics.MAX_PEAK_BYTES},
                }
                for _ in range(metrics.MAX_SUBTASKS)
            ],
        },
        ensure_ascii=False,
    )
    checked = metrics.parse(text, CHECK)
    completed = events_pb2.CheckCompleted(subtasks=checked.subtasks)
    assert completed.ByteSize() <= limits.EVENT_FIELD_BYTES["CheckCompleted.subtasks"]
    assert checked.subtasks[0].violations[-1].startswith("… and ")


def test_a_check_says_which_problems_it_could_not_judge_and_is_then_never_verified():
    subtasks = [
        {"id": "matmul", "passed": True, "speedup": 1.9, "peak_device_bytes": {"judge": 5 << 30, "candidate": 1 << 30}},
        {"id": "rms_norm", "not_judged": "rms_norm not judged on this card: needs about 59 GiB"},
    ]
    document = {"score": 1.9, "cost": 3, "subtasks": subtasks, "passed": True, "verified": True}
    checked = metrics.parse(json.dumps(document), CHECK)
    matmul, rms_norm = checked.subtasks
    assert (matmul.peak_judge_bytes, matmul.peak_candidate_bytes, matmul.not_judged) == (5 << 30, 1 << 30, "")
    assert rms_norm.not_judged.startswith("rms_norm not judged") and rms_norm.peak_judge_bytes == 0
    # A problem not judged makes the check incomplete, whether or not the file says so, and never verified.
    assert checked.incomplete and not checked.verified
    said = metrics.parse(json.dumps({**document, "subtasks": subtasks[:1], "incomplete": True}), CHECK)
    assert said.incomplete and not said.verified
    whole = metrics.parse(json.dumps({**document, "subtasks": subtasks[:1]}), CHECK)
    assert not whole.incomplete and whole.verified


@pytest.mark.parametrize(
    ("subtask", "message"),
    [
        ({"peak_device_bytes": []}, "subtasks[0].peak_device_bytes: must be an object with judge and candidate"),
        ({"peak_device_bytes": {"judge": 1, "gpu": 2}}, "peak_device_bytes: must be an object with judge and"),
        ({"peak_device_bytes": {"judge": -1}}, "subtasks[0].peak_device_bytes.judge: must be a whole number of bytes"),
        ({"peak_device_bytes": {"candidate": True}}, "peak_device_bytes.candidate: must be a whole number"),
        ({"peak_device_bytes": {"judge": 1.5}}, "peak_device_bytes.judge: must be a whole number"),
        ({"peak_device_bytes": {"judge": 10**30}}, "peak_device_bytes.judge: must be a whole number"),
        ({"peak_device_bytes": {"judge": "8"}}, "peak_device_bytes.judge: must be a whole number"),
        ({"peak_judge_bytes": 5}, "subtasks[0].peak_judge_bytes: give it as peak_device_bytes.judge"),
        ({"peakCandidateBytes": -5}, "subtasks[0].peak_candidate_bytes: give it as peak_device_bytes.candidate"),
        ({"not_judged": 7}, "subtasks[0]:"),
        ({"incomplete": "yes"}, None),
    ],
)
def test_peak_memory_and_not_judged_from_a_hostile_file_get_a_clear_status(subtask, message):
    if message is None:  # a check-level flag
        assert problem(json.dumps({"score": 1, "cost": 1, "subtasks": [], **subtask}), CHECK) == (
            "incomplete: must be true or false, got 'yes'"
        )
        return
    assert message in problem(json.dumps({"score": 1, "cost": 1, "subtasks": [{"id": "matmul", **subtask}]}), CHECK)
