"""The rules guard: moving the tag checks to rules that judge differently (guardrails, kernels, score rule, checks)
without raising benchmark.version is refused FAILED_PRECONDITION naming the differences; a raised version starts a new
board; a change that does not judge differently (wording, maintainers, limits) is approved on the same version."""

import copy
import dataclasses
import json

import grpc
from hypothesis import given
from hypothesis import strategies as st

from contracts import rules_guard
from contracts.rules import Rules, parse
from services.common.eventlog import payload_of
from tests.support.ingest import clone, push, refused
from tests.support.refusals import refused as refused_pure

PRECONDITION = "FAILED_PRECONDITION"


def project_rules() -> dict:
    from services.ingest.seed import PROJECT

    return json.loads((PROJECT / "scienceslack.json").read_text())


def typed(document: dict) -> Rules:
    """The project's typed rules carrying ``document`` as read: the guard compares versions and the judging fields
    of the documents (some changes below, such as one kernel, the full validation refuses before the guard)."""
    version = document["benchmark"]["version"]
    return dataclasses.replace(parse(project_rules()), benchmark_version=version, raw=document)


def check_change(approved: dict, new: dict) -> None:
    rules_guard.check_change(typed(approved), typed(new))


def changed(rules: dict, path: str, value) -> dict:
    out = copy.deepcopy(rules)
    *parents, last = path.split(".")
    node = out
    for key in parents:
        node = node[key]
    node[last] = value
    return out


JUDGING_CHANGES = [
    ("guardrails.atol", 0.02),
    ("guardrails.rtol", 0.001),
    ("guardrails.timing.runs", 50),
    ("guardrails.timing.protocol", "cold-host-launch"),
    ("guardrails.timing.statistic", "min"),
    ("guardrails.timing.warmup_runs", 0),
    ("guardrails.timing.l2_flush", False),
    ("benchmark.verifier_versions", [1, 2]),
    ("guardrails.runner_gpu", "NVIDIA B200"),
    ("benchmark.kernels", ["matmul"]),
    ("benchmark.score_rule", "arithmetic mean"),
    ("checks", [{"name": "verify", "script": "checks/other.sbatch", "metrics": "metrics.json", "time_limit_s": 900}]),
]
NEUTRAL_CHANGES = [
    ("benchmark.task", "Reworded: write faster kernels."),
    ("benchmark.name", "KernelBench operators (renamed)"),
    ("maintainers", ["curator", "zed"]),
    ("limits.partitions.main.max_time_s", 7200),
    ("benchmark.status", "saturated"),
]


def test_each_judging_field_is_named_and_needs_a_new_version():
    rules = project_rules()
    version = rules["benchmark"]["version"]
    for path, value in JUDGING_CHANGES:
        new = changed(rules, path, value)
        differences = rules_guard.judging_differences(rules, new)
        assert differences and all(d.startswith(path.rsplit(".", 1)[0]) for d in differences), (path, differences)
        error = refused_pure(check_change, rules, new, code=PRECONDITION, reason="judging_changed")
        assert path.split(".")[0] in error.message and f"raise benchmark.version to {version + 1}" in error.message
        check_change(rules, changed(new, "benchmark.version", version + 1))  # a new board: approved


TIMING_CHANGES = [
    ("guardrails.timing.protocol", "cold-host-launch"),
    ("guardrails.timing.runs", 50),
    ("guardrails.timing.warmup_runs", 3),
    ("benchmark.verifier_versions", [1]),
]


def test_a_timing_change_is_refused_as_one_without_a_version_raise():
    rules = project_rules()
    for path, value in TIMING_CHANGES:
        error = refused_pure(
            check_change, rules, changed(rules, path, value), code=PRECONDITION, reason="judging_changed"
        )
        assert f"a timing change ({path}) is a judging change" in error.message, error.message
    # a change that does not time differently is not worded as a timing change
    error = refused_pure(check_change, rules, changed(rules, "guardrails.atol", 0.5), code=PRECONDITION)
    assert "timing change" not in error.message


def test_version_1s_rules_to_the_bundled_ones_need_the_raise_they_make():
    """The seed's history: the rules of version 1 then the bundled ones, which change the timing protocol and the
    verifier version; kept on version 1 they are refused, naming both."""
    from services.ingest.seed import EARLIER_RULES, PROJECT

    earlier = json.loads((PROJECT / EARLIER_RULES[0]).read_text())
    bundled = project_rules()
    assert earlier["benchmark"]["version"] < bundled["benchmark"]["version"]
    check_change(earlier, bundled)
    kept = changed(bundled, "benchmark.version", earlier["benchmark"]["version"])
    error = refused_pure(check_change, earlier, kept, code=PRECONDITION, reason="judging_changed")
    assert "guardrails.timing.protocol" in error.message and "benchmark.verifier_versions" in error.message
    assert "stays, read-only" in error.message


def test_rules_that_name_no_protocol_time_by_version_1s():
    """Rules approved before the field existed name no protocol: writing version 1's out is no change, and naming
    another is one."""
    v1 = changed(project_rules(), "guardrails.timing.protocol", "cold-host-launch")
    unnamed = copy.deepcopy(v1)
    del unnamed["guardrails"]["timing"]["protocol"]
    assert rules_guard.judging_differences(unnamed, v1) == []
    assert rules_guard.judging_differences(v1, unnamed) == []
    other = changed(v1, "guardrails.timing.protocol", "cold-device-blocking")
    assert rules_guard.judging_differences(unnamed, other) == ["guardrails.timing.protocol"]


def test_changes_that_do_not_judge_keep_the_version():
    rules = project_rules()
    for path, value in NEUTRAL_CHANGES:
        new = changed(rules, path, value)
        assert rules_guard.judging_differences(rules, new) == [], path
        check_change(rules, new)


def test_the_version_never_goes_down_and_first_rules_pass():
    rules = changed(project_rules(), "benchmark.version", 3)
    refused_pure(check_change, rules, project_rules(), code=PRECONDITION, reason="version_lowered")
    rules_guard.check_change(None, typed(rules))


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=10,
)


@given(guardrails=JSON, other=JSON)
def test_any_guardrails_change_is_found_and_no_other_field_counts(guardrails, other):
    rules = project_rules()
    new = changed(changed(rules, "guardrails", guardrails), "benchmark.task", other)
    differences = rules_guard.judging_differences(rules, new)
    assert bool(differences) == (guardrails != rules["guardrails"])
    assert all(d.startswith("guardrails") for d in differences)


async def approve(stack, work, rules: dict, message: str, base: str):
    """Commit the rules on main and move the tag to them; returns (the main push's sha, the tag push's call)."""
    sha = work.commit({"scienceslack.json": json.dumps(rules, indent=2)}, message)
    await push(stack, "curator", "main", work.bundle("refs/heads/main", base))
    work.git("tag", "-f", "checks", sha)
    bundle = work.git("bundle", "create", "-q", "-", "refs/tags/checks", "--not", base)
    return sha, push(stack, "curator", "checks", bundle)


async def test_the_tag_refuses_judging_changes_on_the_same_version(stack, tmp_path):
    work = await clone(stack, "curator", "main", tmp_path / "main")
    base = work.head()
    rules = json.loads((work.path / "scienceslack.json").read_text())
    version = rules["benchmark"]["version"]

    looser = changed(changed(rules, "guardrails.atol", 0.5), "benchmark.score_rule", "arithmetic mean")
    sha, call = await approve(stack, work, looser, "looser atol, another score rule", base)
    details = await refused(stack, call, grpc.StatusCode.FAILED_PRECONDITION, "guardrails.atol")
    assert "benchmark.score_rule" in details and f"raise benchmark.version to {version + 1}" in details
    approvals = len(await stack.events("RulesApproved"))

    # the same change with a new version: a new board, as before
    raised = changed(looser, "benchmark.version", version + 1)
    sha2, call = await approve(stack, work, raised, "looser atol on a new board", sha)
    assert (await call).rules_approved
    approved = payload_of((await stack.events("RulesApproved"))[-1])
    assert (approved.rules_commit, approved.benchmark_version) == (sha2, version + 1)

    # wording and limits on that version: approved without a new one
    reworded = changed(changed(raised, "benchmark.task", "Reworded."), "limits.partitions.main.max_time_s", 1800)
    sha3, call = await approve(stack, work, reworded, "wording and limits", sha2)
    assert (await call).rules_approved
    assert payload_of((await stack.events("RulesApproved"))[-1]).benchmark_version == version + 1
    assert len(await stack.events("RulesApproved")) == approvals + 2

    # lowering the version back is refused too
    lowered = changed(reworded, "benchmark.version", version)
    _, call = await approve(stack, work, lowered, "back to the old version", sha3)
    await refused(stack, call, grpc.StatusCode.FAILED_PRECONDITION, "never goes down")


def test_where_checks_run_is_not_a_judging_change():
    """checks[].partition, gres and supersede say where and when a check runs, not how it is judged: moving checks
    onto the runners (or off them) keeps the board; the check's script still counts."""
    rules = project_rules()
    local = copy.deepcopy(rules)
    for check in local["checks"]:
        for key in rules_guard.CHECK_PLACEMENT:
            check.pop(key, None)
    superseding = copy.deepcopy(rules)
    superseding["checks"][0]["supersede"] = True
    for new in (local, superseding):
        assert rules_guard.judging_differences(rules, new) == []
        check_change(rules, new)
    other_script = copy.deepcopy(local)
    other_script["checks"][0]["script"] = "checks/other.sbatch"
    assert rules_guard.judging_differences(rules, other_script) == ["checks"]
