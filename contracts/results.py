"""How a result is worded: a check's state, its score, its per-problem lines and its reasons, and a board's entries.

One module for every surface (docs/ARCHITECTURE.md, "Results"): `kb checks`, `kb push --wait`, `kb board`,
`kb board --route`, `kb verify`'s summary and the web board all word a result through these functions, so that the
same check reads the same everywhere. It reads plain data only: the protos' messages (CheckCompleted, Subtask,
BoardEntry, BoardRouteRecord) or anything with the same attribute names (kb verify's metrics document, read as
attributes), and imports nothing beyond the standard library, so the verifier's harness can use it too.

The words:

- passed, verified: the score counts (ranked); with its interval where the check measured one: "4.310 (4.270–4.350)".
- passed, unverified (a CPU profile, an unpinned runner, smoke shapes, ...): no score (a CPU profile's host timer at
  smoke shapes says nothing about speed; its per-problem times stay indicative), with why it is not verified.
- a score that is shown but does not count (another's report, a check of a verifier version the rules do not
  accept) is marked "(not counted)".
- failed: no score at all; the reasons say why.
- incomplete: some problem was not judged (the judge's failure, never the route's): no score, never ranked, each such
  problem worded "not judged: <reason>" and the check "incomplete: N problems not judged".
- queued / running: where it is in the queue and about how long until it runs.
- a check of a job's result commit says so after its state ("passed, verified · job 42's result"), wherever it shows.
- disqualified (a maintainer's verdict after the fact): listed beside, its score kept as evidence and marked
  "(not counted)", with who disqualified it and why.
"""

import json
import urllib.parse
from typing import NamedTuple

# The board's sources: what placed an entry (board.proto BoardEntry.source). The board's fold decides which applies.
VERIFIED = "verified"
REPORTED_BY_MAINTAINER = "reported by maintainer"
REPORTED = "reported"
FAILED_CHECK = "failed check"
UNVERIFIED_CHECK = "unverified check"
INCOMPLETE_CHECK = "incomplete check"
DISQUALIFIED = "disqualified"

NO_SCORE = "—"  # where a result has no score (failed, incomplete, not yet run)
NOT_COUNTED = "not counted"
FINAL_STATES = frozenset({"passed", "failed"})  # verifier.proto Check.state once a check has ended


class Verdict(NamedTuple):
    """A result as every surface words it."""

    state: str  # passed | failed | incomplete | queued | running | reported
    label: str  # the state with its qualifier: "passed, verified", "incomplete: 2 problems not judged", ...
    score: str  # the score column: a number, a number marked "(not counted)", or NO_SCORE
    counts: bool  # whether the score counts on the board


# ---- numbers ------------------------------------------------------------------------------------------------------


def number(value: float) -> str:
    """A score (or a cost) as every surface shows it."""
    return f"{value:.3f}"


def with_interval(value: float, low: float = 0.0, high: float = 0.0) -> str:
    """4.310, or 4.310 (4.270–4.350) where the check measured an interval (0/0: none)."""
    text = number(value)
    return f"{text} ({number(low)}–{number(high)})" if (low or high) else text


def not_counted(text: str) -> str:
    return f"{text} ({NOT_COUNTED})"


def times(value: float) -> str:
    """A speed-up as every surface shows it: 1.234×."""
    return f"{value:.3f}×"


def leader_row(leader) -> list[str]:
    """A problem's leaderboard row (board.proto ProblemLeader): problem, best speed-up, route, owner, commit, check."""
    if not leader.route:
        return [leader.problem, NO_SCORE, "no verified speed-up yet", "", "", ""]
    route = leader.route + (f" (job {leader.job_id}'s result)" if leader.job_id else "")
    return [leader.problem, times(leader.speedup), route, leader.owner, leader.sha[:10], leader.check_id]


LEADER_HEADINGS = ["problem", "best speed-up", "route", "owner", "sha", "check"]


def speedup(subtask) -> str:
    """A problem's speed-up: 1.234× (1.200×–1.260×) where measured; NO_SCORE where there is none to show."""
    if not subtask.submitted or not subtask.passed or getattr(subtask, "not_judged", ""):
        return NO_SCORE
    low, high = getattr(subtask, "speedup_low", 0.0), getattr(subtask, "speedup_high", 0.0)
    text = f"{subtask.speedup:.3f}×"
    return f"{text} ({low:.3f}×–{high:.3f}×)" if (low or high) else text


# ---- reasons ------------------------------------------------------------------------------------------------------


def reason(text: str) -> str:
    """A reason on one line: its lines (real ones, or a literal backslash-n from a repr) joined by "; "."""
    lines = (line.strip() for line in text.replace("\\n", "\n").splitlines())
    return "; ".join(line for line in lines if line)


def reasons(texts) -> str:
    return "; ".join(reason(t) for t in texts if t.strip())


# ---- checks -------------------------------------------------------------------------------------------------------


def not_judged(result) -> list:
    return [s for s in getattr(result, "subtasks", ()) if getattr(s, "not_judged", "")]


def unverified_because(result) -> str:
    """Why a passing check is not verified, shortest first: a CPU profile says so."""
    if getattr(result, "runner", "") == "cpu":
        return "CPU profile"
    return reasons(getattr(result, "not_verified_because", ())) or "not on the pinned runner at full shapes"


def not_judged_count(count: int) -> str:
    return f"{count} problem{'s' * (count != 1)} not judged"


def incomplete_reason(result) -> str:
    """An incomplete check's reason, as the board keeps it: "2 problems not judged: matmul: why; ..."."""
    missing = not_judged(result)
    details = "; ".join(f"{s.id}: {reason(s.not_judged)}" for s in missing)
    return not_judged_count(len(missing)) + (f": {details}" if details else "")


def of_job(verdict: Verdict, result) -> Verdict:
    """A verdict on a job's result commit, marked as one (anything with a ``job_id``; "": a push's)."""
    job = getattr(result, "job_id", "")
    return verdict._replace(label=f"{verdict.label} · job {job}'s result") if job else verdict


def check_verdict(result, counted: bool | None = None) -> Verdict:
    """A finished check (CheckCompleted, a board's history record of one, kb verify's document). ``counted``: what
    the board decided of it where a board judged it (a verified check of a verifier version its rules do not accept
    does not count); None: a verified pass counts."""
    return of_job(_check_verdict(result, counted), result)


def _check_verdict(result, counted: bool | None) -> Verdict:
    missing = not_judged(result)
    if getattr(result, "incomplete", False) or missing:
        return Verdict("incomplete", f"incomplete: {not_judged_count(len(missing))}", NO_SCORE, False)
    if not result.passed:
        return Verdict("failed", "failed", NO_SCORE, False)
    score = with_interval(result.score, getattr(result, "score_low", 0.0), getattr(result, "score_high", 0.0))
    if not result.verified:
        return Verdict("passed", f"passed, unverified ({unverified_because(result)})", NO_SCORE, False)
    counts = True if counted is None else counted
    return Verdict("passed", "passed, verified", score if counts else not_counted(score), counts)


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(seconds, 1):.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def queued_label(position: int, estimate_s: float) -> str:
    """A queued check: its place in the queue (1: next) and when it may start, from recent checks' times."""
    if position <= 0:
        return "queued"
    wait = f", starts in about {duration(estimate_s)}" if estimate_s > 0 else ""
    return f"queued, {ordinal(position)} in line{wait}"


def live_verdict(check) -> Verdict:
    """A check as the verifier holds it (verifier.proto Check): queued, running, or its result once final."""
    if check.state in FINAL_STATES and check.HasField("result"):
        return check_verdict(check.result)
    return of_job(_live_verdict(check), check)


def _live_verdict(check) -> Verdict:
    if check.state == "running":
        node, job = getattr(check, "runner_node", ""), getattr(check, "slurm_job_id", "")
        if node:  # on the runners: the node Slurm runs it on
            return Verdict("running", f"running on {node} (Slurm job {job})", NO_SCORE, False)
        if job:
            return Verdict("running", f"submitted to Slurm (job {job}), waiting for a runner", NO_SCORE, False)
        where = f" on {check.claimed_by}" if check.claimed_by else ""
        return Verdict("running", f"running{where}", NO_SCORE, False)
    if check.state == "queued":
        label = queued_label(getattr(check, "queue_position", 0), getattr(check, "estimated_wait_s", 0.0))
        return Verdict("queued", label, NO_SCORE, False)
    return Verdict(check.state, check.state, NO_SCORE, False)


def problem_result(subtask) -> str:
    """A problem's line: not submitted (eager), not judged: why, passed, or failed."""
    if getattr(subtask, "not_judged", ""):
        return f"not judged: {reason(subtask.not_judged)}"
    if not subtask.submitted:
        return "not submitted (eager)"
    mark = "passed" if subtask.passed else "failed"
    return mark + (" · flagged" if getattr(subtask, "flagged", False) else "")


def problem_rows(result) -> list[list[str]]:
    """The per-problem table every surface shows: problem, result, speed-up, violations."""
    return [
        [s.id, problem_result(s), speedup(s), reasons(getattr(s, "violations", ()))]
        for s in getattr(result, "subtasks", ())
    ]


PROBLEM_HEADINGS = ["problem", "result", "speed-up", "violations"]


def ran_with(result) -> str:
    """What the check ran: runner, torch, triton (shown beside the rules' baseline)."""
    parts = [getattr(result, "runner", "") or "runner not recorded"]
    if torch := getattr(result, "torch_version", ""):
        parts.append(f"torch {torch}")
    if triton := getattr(result, "triton_version", ""):
        parts.append(f"triton {triton}")
    return ", ".join(parts)


def check_path(route: str, check_id: str) -> str:
    """The web board's page of a check (services/web), as the CLI prints it."""
    return f"/route/{urllib.parse.quote(route, safe='')}/check/{urllib.parse.quote(check_id, safe='')}"


# ---- the board ----------------------------------------------------------------------------------------------------


def place(entry) -> str:
    """A ranked entry's place: "2", or "=2" where it shares the place with entries whose intervals overlap its own
    (BoardEntry.tied, where the board decides ties)."""
    return f"={entry.rank}" if getattr(entry, "tied", False) else str(entry.rank)


def entry_verdict(entry) -> Verdict:
    """A board entry (BoardEntry): ranked ones count; listed beside ones do not, and a failed check has no score."""
    return of_job(_entry_verdict(entry), entry)


def _entry_verdict(entry) -> Verdict:
    source = entry.source
    score = with_interval(entry.score, getattr(entry, "score_low", 0.0), getattr(entry, "score_high", 0.0))
    if source == FAILED_CHECK:
        return Verdict("failed", "failed", NO_SCORE, False)
    if source == INCOMPLETE_CHECK:  # its reason: incomplete_reason's words
        return Verdict("incomplete", f"incomplete: {entry.reason.partition(':')[0]}", NO_SCORE, False)
    if source == UNVERIFIED_CHECK:
        runner = "CPU profile" if entry.runner == "cpu" else (entry.runner or "an unpinned runner")
        return Verdict("passed", f"passed, unverified ({runner})", NO_SCORE, False)
    if source == DISQUALIFIED:
        return Verdict("disqualified", "disqualified", not_counted(score), False)
    if entry.rank and source == VERIFIED:
        return Verdict("passed", "passed, verified", score, True)
    if entry.rank:
        return Verdict("reported", source, score, True)
    return Verdict("reported", source, not_counted(score), False)


def entry_reason(entry) -> str:
    """Why an entry is where it is (listed beside: why it is not ranked)."""
    if entry.source == UNVERIFIED_CHECK:
        return f"not verified: {reason(entry.reason)}"
    if entry.source == INCOMPLETE_CHECK:
        return reason(entry.reason.partition(": ")[2])
    if entry.source == DISQUALIFIED:
        return disqualified_by(entry.reporter, entry.reason)
    if entry.reason:
        return reason(entry.reason)
    return f"reported by {entry.reporter}" if getattr(entry, "reporter", "") else ""


def in_words(verdict: Verdict) -> str:
    """A verdict in prose: its label, and its score where it has one."""
    return verdict.label + (f", score {verdict.score}" if verdict.score not in (NO_SCORE, "") else "")


def entry_line(entry) -> str:
    """A route's place on a board in one line, as `kb board --route` and the route page say it."""
    where = f"ranked #{place(entry)}" if entry.rank else "listed beside"
    why = entry_reason(entry)
    return f"{where}: {in_words(entry_verdict(entry))}" + (f" — {why}" if why else "")


def record_verdict(record) -> Verdict:
    """One thing in a route's history on a board (BoardRouteRecord)."""
    if record.kind == "check":
        return check_verdict(record, counted=record.counted)
    if record.kind == "report":
        source = REPORTED_BY_MAINTAINER if record.by_maintainer else REPORTED
        counts = record.counted and record.by_maintainer
        text = with_interval(record.score, getattr(record, "score_low", 0.0), getattr(record, "score_high", 0.0))
        return Verdict("reported", source, text if counts else not_counted(text), counts)
    return Verdict(record.kind, "", "", False)  # an adoption mark: its kind and note say it all


def disqualified_by(maintainer: str, why: str) -> str:
    return f"disqualified by {maintainer}: {reason(why)}"


def record_note(record) -> str:
    if record.kind == "disqualified":
        return disqualified_by(record.reporter, record.note)
    if record.kind == "reinstated":
        return f"reinstated by {record.reporter}: {reason(record.note)}"
    return reason(record.note) or reasons(record.reasons)


def route_summary(part) -> str:
    """A route on one board (BoardRouteVersion): its checks, how many count, its reports."""
    return (
        f"{part.checks} check{'s' * (part.checks != 1)}, {part.checks_passed} counted"
        f" (passed, verified), {part.reports} report{'s' * (part.reports != 1)}"
    )


def when(rfc3339: str) -> str:
    """2026-12-02T14:03:09.5Z -> 2026-12-02 14:03 UTC."""
    return f"{rfc3339[:10]} {rfc3339[11:16]} UTC" if rfc3339 else "never"


def plain_value(json_value: str) -> str:
    """A guardrail's JSON value as text: strings without their quotes."""
    return json.loads(json_value) if json_value.startswith('"') else json_value
