"""The version raise on a real private stack (tests/e2e/README.md), as the benchmark had it: version 1's rules in force
(the stack bootstrapped through version 1 only), results on board 1; a maintainer raises to the project's rules
(version 2: the timing protocol cold-device-blocking, verifier version 2), after the guard refused the same timing
change on version 1; results on board 2. Board 1 and its results stay as they were, marked earlier on every read
(ListBoards/GetBoard, `kb board --version 1`, `kb board --list`); new checks land on board 2; routes whose reported
intervals overlap are tied; both boards rebuilt from the log equal the live ones byte for byte.
"""

import json
import shutil

import pytest

from services.ingest.seed import PROJECT
from tests.e2e.actions import commit_and_push, completed_checks, git, issue_token, kb_json, start_and_clone
from tests.e2e.invariants import assert_board_rebuilds, read_log
from tests.e2e.stack import ROOT, Stack, slurm_conf, wait_for

pytestmark = pytest.mark.timeout(900)

ROUTE = "raise-gelu"
OTHER = "raise-other"
CHECK_DEADLINE_S = 420  # a CPU check of one kernel: ~40-70 s on this loaded 2-core machine


@pytest.fixture(scope="module")
async def stack(tmp_path_factory):
    """This module's own stack, with version 1's rules in force (not the project's)."""
    conf = slurm_conf()
    assert conf, "SLURM_CONF must name the local cluster (deploy/local/slurm/up.sh prints it; make up records it)"
    stack = Stack(tmp_path_factory.mktemp("stack"), conf, rules_through=1)
    try:
        await stack.setup()
        yield stack
    finally:
        await stack.teardown()


@pytest.fixture(scope="module")
def people(stack):
    stack.kb("admin", "user", "add", "alice", "--role", "member")
    stack.kb("admin", "user", "add", "alice/agent-1", "--agent-of", "alice")
    return {"curator": stack.token("curator"), "agent": issue_token(stack, "alice/agent-1")}


def push_main(stack, token: str, files: dict[str, str], message: str, name: str) -> str:
    """A maintainer's commit on main of ``files`` (path -> text), pushed; returns its sha."""
    clone = stack.root / f"clone-main-{name}"
    stack.kb("clone", str(clone), token=token)
    env = stack.env()
    for path, text in files.items():
        (clone / path).parent.mkdir(parents=True, exist_ok=True)
        (clone / path).write_text(text)
    git("add", "-A", cwd=clone, env=env)
    git("commit", "-q", "-m", message, cwd=clone, env=env)
    stack.kb("push", "main", "-C", str(clone), token=token)
    return git("rev-parse", "HEAD", cwd=clone, env=env)


def approve(stack, token: str, name: str, *, check: bool = True):
    """`kb rules approve` of main's head, from a fresh clone."""
    clone = stack.root / f"clone-approve-{name}"
    stack.kb("clone", str(clone), token=token)
    return stack.kb("rules", "approve", "-C", str(clone), token=token, check=check)


def report(score: float, interval: tuple[float, float] | None = None) -> str:
    document = {"score": score, "cost": 1.0, "subtasks": []}
    if interval is not None:
        document["score_interval"] = list(interval)
    return json.dumps(document)


async def checked(stack, sha: str):
    [check] = await wait_for(lambda: completed_checks(stack, sha), f"the check of {sha[:12]}", CHECK_DEADLINE_S, 2)
    return check


def entries(board: dict, key: str = "ranked") -> list[tuple]:
    return [(e["route"], e["rank"], e.get("tied", False), e["source"]) for e in board.get(key, [])]


async def test_the_raise_keeps_board_1_as_it_was_and_new_results_land_on_board_2(stack, people):
    curator, agent = people["curator"], people["agent"]

    # --- before: version 1 in force ---------------------------------------------------------------------------
    assert kb_json(stack, "board", token=curator)["version"] == 1
    clone = start_and_clone(stack, ROUTE, agent)
    stack.kb("route", "start", OTHER, token=curator)
    (clone / "routes" / ROUTE).mkdir(parents=True, exist_ok=True)
    for name in ("new_gelu.py", "launch.py"):  # new_gelu imports the route's launch helper
        shutil.copy(ROOT / "kernels" / "triton" / name, clone / "routes" / ROUTE / name)
    first_sha = commit_and_push(stack, clone, agent, "new_gelu")
    push_main(stack, curator, {f"routes/{ROUTE}/metrics.json": report(1.5)}, "report on version 1", "v1-report")
    first = await checked(stack, first_sha)
    assert first.benchmark_version == 1  # requested under the rules in force when the commit came in
    before = await wait_for(
        lambda: (b := kb_json(stack, "board", "--version", "1", token=curator)) and b.get("ranked") and b,
        "the report ranked on board 1",
        30,
    )
    assert entries(before) == [(ROUTE, 1, False, "reported by maintainer")]
    assert not before.get("earlier")
    # The running verifier is version 2; board 1's rules accept version 1: its check is kept, not counted.
    route = kb_json(stack, "board", "--route", ROUTE, "--version", "1", token=curator)
    [record] = [r for r in route["boards"][0]["history"] if r["kind"] == "check"]
    assert not record.get("counted") and "verifier version 2 is not accepted" in record["note"], record

    # --- the raise --------------------------------------------------------------------------------------------
    bundled = json.loads((PROJECT / "scienceslack.json").read_text())
    assert bundled["guardrails"]["timing"]["protocol"] == "cold-device-blocking"
    kept = json.loads(json.dumps(bundled))
    kept["benchmark"]["version"] = 1
    push_main(stack, curator, {"scienceslack.json": json.dumps(kept, indent=2)}, "version 2's timing, kept 1", "kept")
    refused = approve(stack, curator, "kept", check=False)
    said = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "FAILED_PRECONDITION" in said, said
    assert "a timing change (guardrails.timing.protocol" in " ".join(said.split()), said
    assert "raise benchmark.version to 2" in " ".join(said.split()), said

    rules_sha = push_main(
        stack, curator, {"scienceslack.json": json.dumps(bundled, indent=2)}, "benchmark version 2", "raise"
    )
    approve(stack, curator, "raise")
    approvals = [e.rules_approved for e in await read_log(stack.database_url) if e.HasField("rules_approved")]
    assert [(a.benchmark_version, a.rules_commit == rules_sha) for a in approvals][-1] == (2, True)

    # --- after: version 2 in force ----------------------------------------------------------------------------
    (clone / "routes" / ROUTE / "README.md").write_text("new_gelu, checked again under version 2\n")
    second_sha = commit_and_push(stack, clone, agent, "under version 2")
    both = {f"routes/{ROUTE}/metrics.json": report(2.4, (2.3, 2.5)), f"routes/{OTHER}/metrics.json": report(2.2)}
    push_main(stack, curator, both, "reports on version 2", "v2-report")
    second = await checked(stack, second_sha)
    assert (second.benchmark_version, second.passed) == (2, True), list(second.reasons)

    after = await wait_for(
        lambda: (b := kb_json(stack, "board", token=curator)) and b["version"] == 2 and b.get("listed_beside") and b,
        "board 2 with the route's check listed beside",
        30,
    )
    # 2.2 lies beyond the route's interval [2.3, 2.5]: two places; the route's CPU check, accepted on board 2, is
    # listed beside as an unverified check. Then a report of 2.35, inside that interval: one place, shared.
    assert entries(after) == [(ROUTE, 1, False, "reported by maintainer"), (OTHER, 2, False, "reported by maintainer")]
    assert (after["ranked"][0]["score_low"], after["ranked"][0]["score_high"]) == (2.3, 2.5)
    assert [(e["route"], e["source"]) for e in after["listed_beside"]] == [(ROUTE, "unverified check")]
    push_main(stack, curator, {f"routes/{OTHER}/metrics.json": report(2.35)}, "a closer report", "tie")
    tied = await wait_for(
        lambda: (b := kb_json(stack, "board", token=curator)) and b["ranked"][1]["score"] == 2.35 and b,
        "the closer report on board 2",
        30,
    )
    assert entries(tied) == [(ROUTE, 1, True, "reported by maintainer"), (OTHER, 1, True, "reported by maintainer")]
    text = stack.kb("board", token=curator).stdout
    assert "=1" in text and "2.400 (2.300–2.500)" in text, text

    # Board 1 as it was, marked earlier on every read.
    old = kb_json(stack, "board", "--version", "1", token=curator)
    assert old["ranked"] == before["ranked"] and old["listed_beside"] == before["listed_beside"]
    assert (old["earlier"], old["current_version"]) == (True, 2)
    assert old["card"]["rules_commit"] == before["card"]["rules_commit"]
    listed = kb_json(stack, "board", "--list", token=curator)["boards"]
    assert [(b["version"], b.get("earlier", False)) for b in listed] == [(1, True), (2, False)]
    assert "an earlier board, kept read-only" in stack.kb("board", "--version", "1", token=curator).stdout
    list_text = stack.kb("board", "--list", token=curator).stdout.splitlines()
    assert list_text[0].startswith("version 1  earlier") and list_text[1].startswith("version 2  current")

    await assert_board_rebuilds(stack, curator)
