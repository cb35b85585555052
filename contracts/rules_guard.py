"""The rules guard: which new rules may replace the approved ones at the tag checks without a new board
(docs/ARCHITECTURE.md, rules). Pure; the ingest service asks it before it moves the tag."""

from __future__ import annotations

from collections.abc import Mapping

from contracts.refusals import precondition
from contracts.rules import COLD_HOST_LAUNCH, Rules, RulesError, parse

# What decides how a result is judged (docs/ARCHITECTURE.md, rules): a change to any of these makes old and new results
# incomparable, so it needs a new benchmark.version (a new board). Everything else in scienceslack.json (the task's
# wording, the name, status, maintainers, limits, and where and when checks run: CHECK_PLACEMENT) may change on the same
# board.
JUDGING_FIELDS = (
    ("guardrails",),
    ("benchmark", "kernels"),
    ("benchmark", "score_rule"),
    ("benchmark", "metric"),
    ("benchmark", "baseline"),
    ("benchmark", "verifier_versions"),
    ("benchmark", "verifier_version"),
    ("checks",),
)
MISSING = object()


def _at(rules: Mapping, path: tuple[str, ...]):
    value = rules
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return MISSING
        value = value[key]
    return value


def _leaf_differences(prefix: str, old, new) -> list[str]:
    """The dotted paths where two JSON values differ, down to the first non-object level."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        out = []
        for key in sorted(set(old) | set(new), key=str):
            out += _leaf_differences(f"{prefix}.{key}", old.get(key, MISSING), new.get(key, MISSING))
        return out
    return [] if old == new and type(old) is type(new) else [prefix]


# How results are timed: a change to any of these is named as a timing change in the refusal (it is one of the
# judging changes above), because a score timed one way cannot be ranked against one timed another way.
TIMING_FIELDS = ("guardrails.timing", "benchmark.verifier_versions", "benchmark.verifier_version")


# Of a check, where it runs (the runners' partition, the GPUs it asks for) and whether a newer push drops its queued
# runs: none changes how a run is judged (the GPU judged on is guardrails.runner_gpu's).
CHECK_PLACEMENT = ("partition", "gres", "supersede")


def _without_placement(rules: Mapping) -> Mapping:
    checks = rules.get("checks")
    if not isinstance(checks, list):
        return rules
    judged = [
        {k: v for k, v in check.items() if k not in CHECK_PLACEMENT} if isinstance(check, Mapping) else check
        for check in checks
    ]
    return {**rules, "checks": judged}


def _with_default_protocol(rules: Mapping) -> Mapping:
    """Rules that name no guardrails.timing.protocol time by version 1's rule (contracts.rules.Timing's default): the
    guard compares them as if they named it, so that writing the default out is not a change and dropping a named
    protocol is one."""
    timing = _at(rules, ("guardrails", "timing"))
    if not isinstance(timing, Mapping) or "protocol" in timing:
        return rules
    return {**rules, "guardrails": {**rules["guardrails"], "timing": {**timing, "protocol": COLD_HOST_LAUNCH}}}


def judging_differences(old: Mapping, new: Mapping) -> list[str]:
    """The fields that judge results (JUDGING_FIELDS) whose values differ between two versions of the rules, as dotted
    paths (``guardrails.atol``, ``benchmark.kernels``, ``checks``)."""
    old, new = _without_placement(_with_default_protocol(old)), _without_placement(_with_default_protocol(new))
    differences = []
    for path in JUDGING_FIELDS:
        differences += _leaf_differences(".".join(path), _at(old, path), _at(new, path))
    return differences


def check_change(approved: Rules | None, new: Rules) -> None:
    """Approving ``new`` over the ``approved`` rules (None before any, or when the approved ones predate today's
    schema): the same version may change only what does not judge; a version that judges differently must be higher;
    a version never goes down."""
    if approved is None:
        return
    old_version, new_version = approved.benchmark_version, new.benchmark_version
    if new_version < old_version:
        raise precondition(
            "version_lowered",
            f"benchmark.version {new_version} is below the approved {old_version}: a version never goes down",
        )
    if new_version > old_version:
        return  # a new board
    differences = judging_differences(approved.raw, new.raw)
    if differences:
        shown = ", ".join(differences[:20]) + (f" and {len(differences) - 20} more" if len(differences) > 20 else "")
        timing = [d for d in differences if d.startswith(TIMING_FIELDS)]
        why = (
            f"; a timing change ({', '.join(timing)}) is a judging change: a score timed one way cannot be ranked "
            "against one timed another way"
            if timing
            else ""
        )
        raise precondition(
            "judging_changed",
            f"these rules judge differently from the approved ones ({shown}) but keep benchmark.version "
            f"{old_version}{why}: raise benchmark.version to {old_version + 1} so that a new board starts "
            f"(the board of version {old_version} stays, read-only)",
        )


def approved_rules(text: str | bytes | None) -> Rules | None:
    """The rules approved before, typed; None before any, or for rules an older schema approved (they cannot be
    compared field by field, so the new ones are judged on their own)."""
    if not text:
        return None
    try:
        return parse(text)
    except RulesError:
        return None
