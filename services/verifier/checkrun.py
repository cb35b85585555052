"""One run of a check's script, in three steps shared by the verifier's own workers and its Slurm runners:
``prepare`` the box (the working copy from the rules commit plus the judged route's folder; the script's command and
whole environment), run it in the sandbox (on the verifier's host: worker.py; on a runner node: runner.py), and
read back its ``outcome`` (the metrics file it wrote, never following a link out of the box)."""

import time
from dataclasses import dataclass
from pathlib import Path

from contracts import names, rules
from contracts.metrics import MAX_BYTES as MAX_METRICS_BYTES
from services.common.sandbox import Box, Finished, read_result_file
from services.verifier import domain
from services.verifier.domain import CheckItem, RunOutcome
from services.verifier.hostedrepo import CheckCheckout, RepoError
from services.verifier.slots import Slot, check_env


@dataclass(frozen=True)
class Prepared:
    command: list[str]
    env: dict[str, str]
    timing_protocol: str  # the rules' guardrails.timing.protocol, read before the script could touch its copy


def rules_timing_protocol(work: Path) -> str:
    """guardrails.timing.protocol of the rules in a check's working copy (from the rules commit, never the route's);
    "" when they cannot be read: the check is then judged without that comparison."""
    try:
        return rules.load_file(work / rules.RULES_FILE).timing.protocol
    except rules.RulesError:
        return ""


async def prepare(repo: CheckCheckout, item: CheckItem, box: Box, slot: Slot, python: str) -> Prepared | RunOutcome:
    """The box's working copy and the script's command and environment; a RunOutcome saying why not when the check
    cannot run (its commit or script missing)."""
    started = time.monotonic()
    try:
        await repo.export(item.rules_commit, item.sha, item.route, box.work)
    except RepoError as err:
        return RunOutcome(domain.EXIT_COULD_NOT_RUN, False, time.monotonic() - started, None, str(err))
    if not (box.work / item.script).is_file():
        why = f"check script {item.script} is not in rules commit {item.rules_commit[:12]}"
        return RunOutcome(domain.EXIT_COULD_NOT_RUN, False, time.monotonic() - started, None, why)
    route_dir = names.route_dir(item.route)
    metrics_path = box.inner_path("out", item.metrics_file)
    env = check_env(
        box,
        slot,
        python=python,
        route_dir=route_dir,
        metrics_path=metrics_path,
        rules_commit=item.rules_commit,
        check_id=item.check_id,
        check_name=item.check_name,
        sha=item.sha,
    )
    return Prepared(["bash", item.script, route_dir, metrics_path], env, rules_timing_protocol(box.work))


def outcome(item: CheckItem, box: Box, finished: Finished, timing_protocol: str) -> RunOutcome:
    metrics_text, metrics_error = read_result_file(box.path / "out" / item.metrics_file, MAX_METRICS_BYTES)
    return RunOutcome(
        exit_code=finished.exit_code,
        timed_out=finished.timed_out,
        duration_s=finished.duration_s,
        metrics_text=metrics_text,
        output_tail=finished.output_tail,
        metrics_error=metrics_error,
        rules_timing_protocol=timing_protocol,
    )
