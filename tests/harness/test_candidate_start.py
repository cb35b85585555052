"""On the GPU the candidate process starts while the judge times its references (docs/verifier-harness.md, "The process
model"): its interpreter and torch load concurrently, but nothing from the route's directory runs before the judge has
timed every reference and said so, however long that takes; a candidate that dies while it starts still makes the check
"could not run"."""

import os
import re
import secrets
import select
import shutil
import time

import pytest
import torch

from contracts.rules import load_file
from services.verifier.harness import candidate_process
from services.verifier.harness.candidate_process import CandidateProcess, CandidateSetup, make_workdir, stage_route
from services.verifier.harness.check import CouldNotRun, candidate_caps, process_started, run_check
from services.verifier.harness.context import Context
from services.verifier.harness.device import CpuKit
from tests.harness.conftest import REPO

# A route file that, each time it runs, adds the time to a file in the candidate's scratch directory, then fails
# naming every time it ran: a run before the go shows even if the file is run again later.
MARKER = """import os, time
with open(os.path.join(os.environ["TMPDIR"], "ran-@TOKEN@"), "a+") as marks:
    marks.write(repr(time.monotonic()) + "\\n")
    marks.seek(0)
    raise RuntimeError("route code ran at " + " ".join(marks.read().split()))
"""


def _marker_route(directory, token: str):
    directory.mkdir()
    (directory / "new_gelu.py").write_text(MARKER.replace("@TOKEN@", token))
    return directory


def _times(error: str) -> list[float]:
    found = re.search(r"route code ran at ([0-9. ]+)", error)
    assert found, error
    return [float(t) for t in found.group(1).split()]


def test_no_route_code_runs_in_the_candidate_before_the_judge_lets_it_go(tmp_path, rules_path):
    """The judge (here the test) holds the go well past the candidate's start-up: the route's files run only after."""
    rules = load_file(rules_path)
    device = torch.device("cpu")
    ctx = Context(rules, "smoke", device, CpuKit(device))
    workdir = make_workdir()
    token = secrets.token_hex(6)
    setup = CandidateSetup(
        route_dir=stage_route(_marker_route(tmp_path / "route", token), workdir),
        problems_root=REPO,
        hidden=(),
        caps=candidate_caps("cpu"),
        profile="cpu",
    )
    candidate = CandidateProcess(ctx, setup, workdir)
    try:
        # It has loaded torch and says it waits; give it time to do anything it should not, then let it go.
        assert select.select([candidate.channel.read_fd], [], [], 120)[0], "the candidate never finished starting"
        time.sleep(2)
        candidate.go(0)
        deadline = time.monotonic() + 120
        header, _ = candidate.ask({"op": "load", "problem": "new_gelu", "param_seed": 1}, deadline)
    finally:
        candidate.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    ran = _times(header["error"])
    assert candidate.waiting_at < candidate.go_at - 2
    assert min(ran) > candidate.go_at, (ran, candidate.go_at)


def test_route_code_runs_only_after_the_reference_phase_of_the_check(tmp_path, rules_path):
    route = tmp_path / "route"
    route.mkdir()
    (route / "new_gelu.py").write_text('import time\n\nraise RuntimeError(f"imported at {time.monotonic()!r}")\n')
    doc = run_check(route, rules_path, shapes="smoke", device="cpu", only=["sum_dim", "new_gelu"])
    (sub,) = [s for s in doc["subtasks"] if s["id"] == "new_gelu"]
    (violation,) = sub["violations"]
    # In the phases' resolution (ms): the import can follow the ready within the same millisecond.
    imported = round(float(re.search(r"imported at ([0-9.]+)", violation).group(1)) - process_started(), 3)
    phases = doc["phases"]
    (first,) = phases["candidates"]
    # The CPU profile's references are timed by the host clock, which a starting candidate would share: it starts
    # after them (on the GPU it starts before them and waits; the test above holds such a wait).
    assert doc["profile"] == "cpu" and phases["reference_phase"][1] <= first["spawned"], phases
    # Let go when the first problem it judges needs it, after the references; the route imported after that.
    assert phases["reference_phase"][1] <= phases["problems"]["new_gelu"][0] <= first["go"] <= first["ready"], phases
    assert first["ready"] <= imported <= phases["problems"]["new_gelu"][1] <= phases["check_ended"], (imported, phases)
    assert set(doc["details"]["new_gelu"]["step_s"]) == {"candidate", "load"}  # the step that failed is counted too


def test_a_candidate_that_dies_while_it_starts_makes_the_check_could_not_run(rules_path, monkeypatch):
    monkeypatch.setenv("KB_CANDIDATE_MEMORY_MB", "64")  # torch alone takes a few hundred
    with pytest.raises(CouldNotRun) as caught:
        run_check(REPO / "tests/harness/routes/reference", rules_path, shapes="smoke", device="cpu", only=["new_gelu"])
    assert str(caught.value).startswith(
        "the candidate process could not start before any route code ran: route: the candidate process ended during "
        "'start-up'"
    ), caught.value


def test_a_candidate_that_cannot_be_started_leaves_no_descriptor_open_in_the_judge(tmp_path, rules_path, monkeypatch):
    """The judge survives a failed start (the check goes on to say it could not run): the pipes, sockets and the
    output tail's pipe it made for that candidate are closed, not left for the rest of the judge's life."""
    rules = load_file(rules_path)
    device = torch.device("cpu")
    ctx = Context(rules, "smoke", device, CpuKit(device))
    workdir = make_workdir()
    setup = CandidateSetup(
        route_dir=stage_route(_marker_route(tmp_path / "route", "x"), workdir),
        problems_root=REPO,
        hidden=(),
        caps=candidate_caps("cpu"),
        profile="cpu",
    )

    def cannot_start(*args, **kwargs):
        raise OSError("no such interpreter")

    monkeypatch.setattr(candidate_process.subprocess, "Popen", cannot_start)
    before = sorted(os.listdir("/proc/self/fd"))
    try:
        with pytest.raises(OSError, match="no such interpreter"):
            CandidateProcess(ctx, setup, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    assert sorted(os.listdir("/proc/self/fd")) == before
