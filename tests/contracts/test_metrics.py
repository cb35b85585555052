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

    assert check.VERIFIER_VERSION is metrics.VERIFIER_VERSION == 1


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
    """64 subtasks, each with a long id and 25 violations of 500 four-byte characters (a 3.3 MB file, under the
    file limit): what the parser keeps fits
    CheckCompleted.subtasks' limit at append, so a hostile or verbose check is recorded, not refused by the log."""
    from kernelboard.v1 import events_pb2

    from contracts import limits

    wide = "\U0001f600" * metrics.MAX_TEXT
    text = json.dumps(
        {
            "score": 1,
            "cost": 1,
            "subtasks": [{"id": wide, "violations": [wide] * 25, "speedup": 1.0} for _ in range(metrics.MAX_SUBTASKS)],
        },
        ensure_ascii=False,
    )
    checked = metrics.parse(text, CHECK)
    completed = events_pb2.CheckCompleted(subtasks=checked.subtasks)
    assert completed.ByteSize() <= limits.EVENT_FIELD_BYTES["CheckCompleted.subtasks"]
    assert checked.subtasks[0].violations[-1].startswith("… and ")
