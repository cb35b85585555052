"""The verifier's decisions, as pure functions over plain data (no I/O).

Which commits get checked (CommitIngested of kind route or job), which checks (every check the rules at the tag
`checks` name), and how a finished run of a check script (exit status, time limit, the metrics file it wrote)
becomes a CheckCompleted: passed, or failed with reasons.
"""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from kernelboard.v1 import events_pb2

from contracts import metrics as metrics_format
from contracts.metrics import EXIT_BROKEN, EXIT_COULD_NOT_RUN, EXIT_PASSED, MAX_REASONS, Metrics, MetricsError
from contracts.metrics import cut as _text
from contracts.rules import Rules

CHECKED_KINDS = frozenset({events_pb2.COMMIT_KIND_ROUTE, events_pb2.COMMIT_KIND_JOB})
# uuid5 namespace of check ids: the same (route, sha, check, rules commit) always names the same check.
CHECK_NAMESPACE = uuid.UUID("5c0e4a3e-8f1b-4f55-9a57-6b1d0c3f7a10")

INCOMPLETE_ATTEMPTS = 2  # an incomplete check runs once more, then is recorded incomplete

# failure_reason labels (kb_verifier_failures_total{reason}).
GUARDRAIL = "guardrail"
COULD_NOT_RUN = "could_not_run"
TIME_LIMIT = "time_limit"
NO_METRICS = "no_metrics"
MALFORMED_METRICS = "malformed_metrics"
CRASHED = "crashed"
ABANDONED = "abandoned"
WRONG_TIMING = "wrong_timing"
NO_ROUTE = "no_route"
SUPERSEDED = "superseded"
SLURM_REFUSED = "slurm_refused"
NOT_STARTED = "not_started"
RUNNER_LOST = "runner_lost"


@dataclass(frozen=True)
class ApprovedRules:
    """The rules at the tag `checks`: its commit and the validated scienceslack.json there."""

    rules_commit: str
    rules: Rules


@dataclass(frozen=True)
class CheckItem:
    """One check of one commit, as queued."""

    check_id: str
    dedupe_key: str
    check_name: str
    ref: str
    sha: str
    route: str
    kind: int
    job_id: str
    rules_commit: str
    benchmark_version: int
    script: str
    metrics_file: str
    time_limit_s: int
    trigger_event_id: str
    owner: str = ""  # whom the push was for: the fairness key among checks waiting for a runner
    partition: str = ""  # the runners' Slurm partition it runs on ("" on the verifier's host)
    gres: str = ""
    supersede: bool = False


@dataclass(frozen=True)
class RunOutcome:
    """What the sandbox saw of one run of a check script."""

    exit_code: int | None  # None when it was killed at its time limit; negative: killed by that signal
    timed_out: bool
    duration_s: float
    metrics_text: bytes | None  # the metrics file as written, None when there is none
    output_tail: str = ""  # the end of its stdout + stderr, for the log and for "could not run" reasons
    metrics_error: str = ""  # why the metrics file could not be read (e.g. a symlink), when it was there
    # The timing protocol of the rules the run applied (guardrails.timing.protocol at the rules commit, read from the
    # working copy before the script ran); "" when it could not be read.
    rules_timing_protocol: str = ""


@dataclass(frozen=True)
class Verdict:
    completed: events_pb2.CheckCompleted
    failure_reason: str | None  # one word for metrics; None when passed

    @property
    def retry(self) -> bool:
        """A check the judge could not finish (a problem not judged, the judge's fault, not the route's) is run once
        more before it is recorded as incomplete."""
        return self.completed.incomplete and self.completed.attempts < INCOMPLETE_ATTEMPTS


def dedupe_key(route: str, sha: str, check_name: str, rules_commit: str) -> str:
    return f"{route}\x1f{sha}\x1f{check_name}\x1f{rules_commit}"


def check_id_for(key: str) -> str:
    return str(uuid.uuid5(CHECK_NAMESPACE, key))


def requested_event_id(check_id: str) -> str:
    """The CheckRequested's event id, fixed by the check: appending it twice is refused by the log."""
    return str(uuid.uuid5(CHECK_NAMESPACE, f"requested:{check_id}"))


def completed_event_id(check_id: str) -> str:
    return str(uuid.uuid5(CHECK_NAMESPACE, f"completed:{check_id}"))


def route_of_job(job_events: Sequence[events_pb2.Event]) -> str:
    """The route a job ran for, from its JobSubmitted ("" when the job's stream does not say)."""
    for event in job_events:
        if event.WhichOneof("payload") == "job_submitted":
            return event.job_submitted.route
    return ""


def checks_for_commit(
    commit: events_pb2.CommitIngested, trigger_event_id: str, approved: ApprovedRules, route: str
) -> list[CheckItem]:
    """The checks a commit gets: every check of the rules, for route and job commits only.

    route: the commit's route (for a job commit, the route of its JobSubmitted; "" when unknown: the check then
    fails saying so, rather than the commit going unchecked).
    """
    if commit.kind not in CHECKED_KINDS:
        return []
    items = []
    for check in approved.rules.checks:
        key = dedupe_key(route, commit.sha, check.name, approved.rules_commit)
        items.append(
            CheckItem(
                check_id=check_id_for(key),
                dedupe_key=key,
                check_name=check.name,
                ref=commit.ref,
                sha=commit.sha,
                route=route,
                kind=commit.kind,
                job_id=commit.job_id,
                rules_commit=approved.rules_commit,
                benchmark_version=approved.rules.benchmark_version,
                script=check.script,
                metrics_file=check.metrics,
                time_limit_s=check.time_limit_s,
                trigger_event_id=trigger_event_id,
                owner=commit.owner or route,
                partition=check.partition,
                gres=check.gres,
                supersede=check.supersede,
            )
        )
    return items


def requested_event(item: CheckItem) -> events_pb2.CheckRequested:
    return events_pb2.CheckRequested(
        check_id=item.check_id,
        check_name=item.check_name,
        ref=item.ref,
        sha=item.sha,
        route=item.route,
        kind=item.kind,
        job_id=item.job_id,
        rules_commit=item.rules_commit,
        benchmark_version=item.benchmark_version,
        trigger_event_id=item.trigger_event_id,
    )


def _base_completed(item: CheckItem, duration_s: float, host: str) -> events_pb2.CheckCompleted:
    return events_pb2.CheckCompleted(
        check_id=item.check_id,
        check_name=item.check_name,
        ref=item.ref,
        sha=item.sha,
        route=item.route,
        kind=item.kind,
        job_id=item.job_id,
        rules_commit=item.rules_commit,
        benchmark_version=item.benchmark_version,
        duration_s=duration_s,
        verifier_host=host,
    )


def parse_metrics(data: bytes) -> Metrics:
    """A check's metrics file, in contracts.metrics' CHECK profile; raises MetricsError naming the first problem."""
    return metrics_format.parse(data, metrics_format.CHECK)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return _text(lines[-1]) if lines else ""


def judge(item: CheckItem, outcome: RunOutcome, *, host: str) -> Verdict:
    """The CheckCompleted of one run: passed only when the script exited 0 and wrote a valid metrics file that
    does not say otherwise; every other ending fails with a reason that says what happened."""
    completed = _base_completed(item, outcome.duration_s, host)
    metrics, metrics_problem = None, None
    if outcome.metrics_error:
        metrics_problem = f"malformed metrics file {item.metrics_file}: {outcome.metrics_error}"
    elif outcome.metrics_text is None:
        metrics_problem = f"the check wrote no metrics file ({item.metrics_file})"
    else:
        try:
            metrics = parse_metrics(outcome.metrics_text)
        except MetricsError as err:
            metrics_problem = f"malformed metrics file {item.metrics_file}: {err}"
    if metrics is not None:
        completed.score = metrics.score
        completed.cost = metrics.cost
        completed.subtasks.extend(metrics.subtasks)
        completed.runner = metrics.runner
        completed.torch_version = metrics.torch_version
        completed.triton_version = metrics.triton_version
        completed.verified = metrics.verified
        completed.not_verified_because.extend(metrics.not_verified_because)
        completed.score_low, completed.score_high = metrics.score_low, metrics.score_high
        completed.timing_protocol = metrics.timing_protocol
        completed.incomplete = metrics.incomplete  # never verified (contracts.metrics), retried by the worker

    def failed(reason: str, *reasons: str) -> Verdict:
        completed.passed = False
        completed.verified = False
        completed.reasons.extend([_text(r) for r in reasons if r][:MAX_REASONS])
        return Verdict(completed, reason)

    if outcome.timed_out:
        return failed(TIME_LIMIT, f"time limit: the check ran past {item.time_limit_s} s and was killed")
    code = outcome.exit_code
    if code == EXIT_COULD_NOT_RUN:
        why = list(metrics.reasons) if metrics and metrics.reasons else [_last_line(outcome.output_tail)]
        return failed(COULD_NOT_RUN, *[f"could not run: {w}" if w else "could not run" for w in why])
    if code not in (EXIT_PASSED, EXIT_BROKEN):
        how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit status {code}"
        return failed(CRASHED, f"the check script failed ({how})", _last_line(outcome.output_tail))
    if metrics is None:
        absent = outcome.metrics_text is None and not outcome.metrics_error
        return failed(NO_METRICS if absent else MALFORMED_METRICS, metrics_problem)
    if code == EXIT_BROKEN:
        return failed(GUARDRAIL, *(metrics.reasons or ("the check script exited 1 (a guardrail broken)",)))
    if metrics.passed is False:
        return failed(
            MALFORMED_METRICS, "the check script exited 0 but its metrics file says passed: false", *metrics.reasons
        )
    wanted = outcome.rules_timing_protocol
    if metrics.timing_protocol and wanted and metrics.timing_protocol != wanted:
        # A score timed by another rule cannot rank on this board (docs/decisions/0001-verifier-version-2.md).
        return failed(
            WRONG_TIMING,
            f"the check was timed by {metrics.timing_protocol!r}, but the rules at {item.rules_commit[:12]} time by "
            f"{wanted!r} (guardrails.timing.protocol)",
        )
    completed.passed = True
    return Verdict(completed, None)


def abandoned(item: CheckItem, attempts: int, *, host: str) -> Verdict:
    """A check whose runs kept dying with their worker: failed, so that it stops taking a GPU."""
    completed = _base_completed(item, 0.0, host)
    completed.reasons.append(f"abandoned: the check's worker died {attempts} times before it finished")
    return Verdict(completed, ABANDONED)


def no_route(item: CheckItem, *, host: str) -> Verdict:
    completed = _base_completed(item, 0.0, host)
    completed.reasons.append(f"could not run: no route known for job {item.job_id} (no JobSubmitted in its stream)")
    return Verdict(completed, NO_ROUTE)


def superseded(item: CheckItem, newer_sha: str) -> Verdict:
    """A queued check dropped for the route's newer push (the rules' checks[].supersede)."""
    completed = _base_completed(item, 0.0, "")
    completed.reasons.append(f"superseded: not run, the route's newer commit {newer_sha[:12]} is checked instead")
    return Verdict(completed, SUPERSEDED)


def slurm_refused(item: CheckItem, attempts: int, message: str) -> Verdict:
    """Slurm turned the check's job down (sbatch's answer): running it again would be turned down too."""
    completed = _base_completed(item, 0.0, "")
    completed.attempts = attempts
    completed.reasons.append(
        _text(f"could not run: Slurm refused the check's job on partition {item.partition}: {message}")
    )
    return Verdict(completed, SLURM_REFUSED)


def runner_lost(item: CheckItem, attempts: int, how: str, *, host: str) -> Verdict:
    """A check whose Slurm jobs kept ending without a result (the runner node failed, the job was cancelled, it
    never started): failed after its last attempt, saying how the last one ended."""
    completed = _base_completed(item, 0.0, host)
    completed.attempts = attempts
    completed.reasons.append(_text(f"runner lost: {attempts} attempts on the runners, the last {how}"))
    return Verdict(completed, NOT_STARTED if how.startswith("not started") else RUNNER_LOST)
