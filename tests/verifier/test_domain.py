"""The verifier's pure decisions: which commits get which checks, and how a run becomes a CheckCompleted."""

import json

import pytest
from kernelboard.v1 import events_pb2

from contracts import metrics
from contracts.rules import parse
from services.verifier import domain
from services.verifier.domain import ApprovedRules, RunOutcome
from tests.verifier.conftest import project_rules, rules_with_checks

SHA = "a" * 40
RULES_COMMIT = "b" * 40
VALID = {
    "score": 1.25,
    "cost": 3.5,
    "passed": True,
    "runner": "NVIDIA H200",
    "torch": "2.11.0",
    "triton": "3.6.0",
    "verified": True,
    "subtasks": [{"id": "matmul", "passed": True, "submitted": True, "speedup": 1.25, "violations": []}],
}


def approved(rules: dict | None = None) -> ApprovedRules:
    return ApprovedRules(RULES_COMMIT, parse(rules or project_rules()))


def commit(kind=events_pb2.COMMIT_KIND_ROUTE, **fields) -> events_pb2.CommitIngested:
    return events_pb2.CommitIngested(ref="refs/heads/routes/fast", sha=SHA, kind=kind, route="fast", **fields)


def item() -> domain.CheckItem:
    [only] = domain.checks_for_commit(commit(), "e1", approved(), "fast")
    return only


def outcome(code=0, metrics: dict | bytes | None = VALID, timed_out=False, tail="") -> RunOutcome:
    text = metrics if isinstance(metrics, bytes | None) else json.dumps(metrics).encode()
    return RunOutcome(exit_code=code, timed_out=timed_out, duration_s=2.0, metrics_text=text, output_tail=tail)


def test_route_and_job_commits_get_every_check_of_the_rules():
    rules = rules_with_checks(
        {"name": "verify", "script": "checks/verify.sbatch", "metrics": "metrics.json", "time_limit_s": 900},
        {"name": "lint", "script": "checks/lint.sh", "metrics": "lint.json", "time_limit_s": 60},
    )
    items = domain.checks_for_commit(commit(), "e1", approved(rules), "fast")
    assert [(i.check_name, i.script, i.metrics_file, i.time_limit_s) for i in items] == [
        ("verify", "checks/verify.sbatch", "metrics.json", 900),
        ("lint", "checks/lint.sh", "lint.json", 60),
    ]
    assert all(i.rules_commit == RULES_COMMIT and i.trigger_event_id == "e1" for i in items)
    job = domain.checks_for_commit(commit(events_pb2.COMMIT_KIND_JOB, job_id="17"), "e2", approved(rules), "fast")
    assert len(job) == 2 and job[0].job_id == "17"


@pytest.mark.parametrize("kind", [events_pb2.COMMIT_KIND_MAIN, events_pb2.COMMIT_KIND_PULL, events_pb2.COMMIT_KIND_TAG])
def test_other_commits_are_not_checked(kind):
    assert domain.checks_for_commit(commit(kind), "e1", approved(), "fast") == []


def test_the_same_commit_check_and_rules_always_name_the_same_check():
    first = domain.checks_for_commit(commit(), "e1", approved(), "fast")[0]
    again = domain.checks_for_commit(commit(), "e-redelivered", approved(), "fast")[0]
    assert first.check_id == again.check_id
    other_rules = ApprovedRules("c" * 40, parse(project_rules()))
    assert domain.checks_for_commit(commit(), "e1", other_rules, "fast")[0].check_id != first.check_id


def test_route_of_job_reads_its_job_submitted():
    submitted = events_pb2.Event(job_submitted=events_pb2.JobSubmitted(job_id="17", route="fast"))
    held = events_pb2.Event(job_held=events_pb2.JobHeld(job_id="17"))
    assert domain.route_of_job([held, submitted]) == "fast"
    assert domain.route_of_job([held]) == ""


def test_a_clean_run_passes_with_everything_the_metrics_say():
    verdict = domain.judge(item(), outcome(), host="h1")
    done = verdict.completed
    assert done.passed and verdict.failure_reason is None and list(done.reasons) == []
    assert (done.score, done.cost, done.runner, done.torch_version, done.triton_version) == (
        1.25,
        3.5,
        "NVIDIA H200",
        "2.11.0",
        "3.6.0",
    )
    assert done.verified and done.subtasks[0].id == "matmul" and done.subtasks[0].speedup == 1.25
    assert (done.rules_commit, done.sha, done.route, done.verifier_host) == (RULES_COMMIT, SHA, "fast", "h1")


def test_a_check_carries_its_noise_and_timing_protocol_into_check_completed():
    noisy = {
        **VALID,
        "score_interval": [1.2, 1.3],
        "timing_protocol": "cold-device-blocking",
        "subtasks": [{**VALID["subtasks"][0], "speedup_interval": [1.24, 1.26], "candidate_rsd": 0.003}],
    }
    done = domain.judge(item(), outcome(0, noisy), host="h").completed
    assert done.passed and (done.score_low, done.score_high, done.timing_protocol) == (1.2, 1.3, "cold-device-blocking")
    problem = done.subtasks[0]
    assert (problem.speedup_low, problem.speedup_high, problem.candidate_rsd) == (1.24, 1.26, 0.003)
    # an interval that does not hold its score is a malformed file, named, and nothing of it is recorded as passed
    verdict = domain.judge(item(), outcome(0, {**noisy, "score_interval": [1.3, 1.4]}), host="h")
    assert not verdict.completed.passed and verdict.failure_reason == domain.MALFORMED_METRICS
    assert "score_interval: must hold its value" in verdict.completed.reasons[0]


def test_a_check_timed_by_another_protocol_than_its_rules_fails_saying_so():
    timed = {**VALID, "timing_protocol": "cold-host-launch"}
    run = RunOutcome(0, False, 2.0, json.dumps(timed).encode(), rules_timing_protocol="cold-device-blocking")
    verdict = domain.judge(item(), run, host="h")
    assert not verdict.completed.passed and not verdict.completed.verified
    assert verdict.failure_reason == domain.WRONG_TIMING
    assert (
        "timed by 'cold-host-launch', but the rules at bbbbbbbbbbbb time by 'cold-device-blocking'"
        in (verdict.completed.reasons[0])
    )
    # the same protocol, a check that does not say, or rules that could not be read: judged as before
    for said, wanted in (
        ({"timing_protocol": "cold-device-blocking"}, "cold-device-blocking"),
        ({}, "cold-device-blocking"),
        ({"timing_protocol": "cold-host-launch"}, ""),
    ):
        run = RunOutcome(0, False, 2.0, json.dumps({**VALID, **said}).encode(), rules_timing_protocol=wanted)
        assert domain.judge(item(), run, host="h").completed.passed, (said, wanted)


def test_the_worker_reads_the_rules_protocol_from_the_working_copy(tmp_path):
    from services.verifier.checkrun import rules_timing_protocol

    assert rules_timing_protocol(tmp_path) == ""  # no rules there
    (tmp_path / "scienceslack.json").write_text(json.dumps(project_rules()))
    assert rules_timing_protocol(tmp_path) == "cold-device-blocking"


def test_a_broken_guardrail_fails_with_the_harness_reasons():
    broken = {**VALID, "passed": False, "reasons": ["new_gelu: class 3 (input mutation): ..."]}
    verdict = domain.judge(item(), outcome(1, broken), host="h")
    assert not verdict.completed.passed and verdict.failure_reason == domain.GUARDRAIL
    assert list(verdict.completed.reasons) == ["new_gelu: class 3 (input mutation): ..."]
    assert verdict.completed.score == 1.25  # the numbers stay, for the record


@pytest.mark.parametrize(
    ("run", "reason", "words"),
    [
        (outcome(0, timed_out=True), domain.TIME_LIMIT, "time limit"),
        (outcome(None, None, timed_out=True), domain.TIME_LIMIT, "time limit"),
        (outcome(2, {**VALID, "reasons": ["no GPU here"]}), domain.COULD_NOT_RUN, "could not run: no GPU here"),
        (outcome(2, None, tail="x\nbad rules\n"), domain.COULD_NOT_RUN, "could not run: bad rules"),
        (outcome(0, None), domain.NO_METRICS, "wrote no metrics file"),
        (outcome(0, b"{not json"), domain.MALFORMED_METRICS, "not valid JSON"),
        (outcome(0, b"[" * 100_000), domain.MALFORMED_METRICS, "nested too deeply"),
        (
            RunOutcome(0, False, 1.0, None, metrics_error="not a regular file"),
            domain.MALFORMED_METRICS,
            "metrics.json: not a regular file",
        ),
        (outcome(0, {"score": 1, "cost": 0}), domain.MALFORMED_METRICS, "subtasks: required field missing"),
        (outcome(0, {**VALID, "score": "fast"}), domain.MALFORMED_METRICS, "score: must be a number"),
        (outcome(0, {**VALID, "score": -1}), domain.MALFORMED_METRICS, "score: must be a finite number >= 0"),
        (outcome(0, {**VALID, "subtasks": [{"id": "x", "bogus": 1}]}), domain.MALFORMED_METRICS, "subtasks[0]"),
        (outcome(0, {**VALID, "subtasks": [{"passed": True}]}), domain.MALFORMED_METRICS, "subtasks[0].id"),
        (outcome(0, {**VALID, "passed": False}), domain.MALFORMED_METRICS, "exited 0 but"),
        (outcome(-9), domain.CRASHED, "killed by signal 9"),
        (outcome(127, tail="bash: python: not found"), domain.CRASHED, "exit status 127"),
    ],
)
def test_every_other_ending_fails_saying_why(run, reason, words):
    verdict = domain.judge(item(), run, host="h")
    assert not verdict.completed.passed and not verdict.completed.verified
    assert verdict.failure_reason == reason
    assert any(words in r for r in verdict.completed.reasons), list(verdict.completed.reasons)


def test_a_huge_metrics_file_is_refused_and_long_texts_are_cut():
    huge = b" " * (metrics.MAX_BYTES + 1)
    assert "over the" in domain.judge(item(), outcome(0, huge), host="h").completed.reasons[0]
    noisy = {**VALID, "passed": False, "reasons": ["x" * 10_000] * 200}
    verdict = domain.judge(item(), outcome(1, noisy), host="h")
    assert len(verdict.completed.reasons) == metrics.MAX_REASONS
    assert all(len(r) <= metrics.MAX_TEXT for r in verdict.completed.reasons)


def test_abandoned_and_routeless_checks_fail():
    assert "died 3 times" in domain.abandoned(item(), 3, host="h").completed.reasons[0]
    assert domain.no_route(item(), host="h").failure_reason == domain.NO_ROUTE


def test_a_check_the_judge_could_not_finish_keeps_what_it_judged_is_never_verified_and_is_retried_once():
    rms_norm = {"id": "rms_norm", "submitted": True, "not_judged": "rms_norm not judged on this card: needs 59 GiB"}
    document = {**VALID, "subtasks": [*VALID["subtasks"], rms_norm], "incomplete": True}
    verdict = domain.judge(item(), outcome(0, document), host="w")
    completed = verdict.completed
    assert completed.incomplete and completed.passed and not completed.verified
    assert [(s.id, s.not_judged) for s in completed.subtasks] == [("matmul", ""), ("rms_norm", rms_norm["not_judged"])]
    assert completed.subtasks[0].speedup == 1.25  # the problem judged before it stays
    completed.attempts = 1
    assert verdict.retry
    completed.attempts = domain.INCOMPLETE_ATTEMPTS
    assert not verdict.retry
    whole = domain.judge(item(), outcome(0, VALID), host="w")
    assert not whole.completed.incomplete and whole.completed.verified and not whole.retry
