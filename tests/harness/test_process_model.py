# One file past 500 lines: each test is one attack on the process model (a route in tests/harness/attacks and the
# verdict it must get); they share those routes and the record below of what each beat before the split.
"""The judge apart from the judged (issue 13): attacks that beat a harness sharing its process with route code, and
routes that break their process, each judged through the candidate process.

Every attack here was run against the harness before the split (main at 32ad781) and beat it: the forged verdict
exited 0 with the forged file, the slowed reference gave a speed-up of hundreds, the process-wide precision switch
kept the error ratio at 1, the version-counter cache and the swapped reference forward passed "faster", the timer
patch reported a thousandth of its time, and the root-only file's contents came back in the failure reason.
"""

import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from services.verifier.harness import gated, timing
from services.verifier.harness.candidate import Runner
from services.verifier.harness.candidate_process import CandidateProcess
from services.verifier.harness.channel import OutputTail
from services.verifier.harness.check import run_check
from services.verifier.harness.compare import fingerprint
from services.verifier.harness.confine import job_ids
from tests.harness.conftest import HERE, ROUTES, run_cli
from tests.missing import missing_service

ATTACKS = HERE / "attacks"
AS_ROOT = pytest.mark.skipif(
    os.geteuid() != 0 or job_ids() is None,
    reason=missing_service("confinement", "needs root and the job user kb-job: make up / .ci/run provide it"),
)


def _only(doc: dict, problem_id: str) -> dict:
    (sub,) = [s for s in doc["subtasks"] if s["id"] == problem_id]
    return sub


def smoke(route: Path, rules_path, *only: str, skip_static: bool = False) -> dict:
    return run_check(route, rules_path, shapes="smoke", device="cpu", only=list(only), skip_static=skip_static)


# -- attacks -----------------------------------------------------------------------------------------------------------
def test_a_forged_verdict_and_a_clean_exit_of_the_route_never_make_a_pass(tmp_path):
    metrics = tmp_path / "out" / "metrics.json"
    args = [str(ATTACKS / "forge_verdict"), "--metrics", str(metrics), "--shapes", "smoke", "--device", "cpu"]
    done = run_cli(*args, "--only", "new_gelu")
    assert done.returncode == 1, done.stdout + done.stderr
    doc = json.loads(metrics.read_text())
    assert doc["passed"] is False and doc["score"] != 99.0
    (violation,) = _only(doc, "new_gelu")["violations"]
    assert violation.startswith("route: the candidate process ended during 'load' and exited with code 0"), violation


def test_re_registering_an_aten_kernel_cannot_slow_the_reference(rules_path):
    doc = smoke(ATTACKS / "slow_reference", rules_path, "new_gelu")
    sub = _only(doc, "new_gelu")
    assert sub["passed"], sub["violations"]  # its results are exact: what it must not get is the speed-up
    assert sub["reference_ms"] < 5, sub  # the re-registered kernel sleeps 20 ms in every call it reaches
    assert sub["speedup"] < 5, sub


def test_process_wide_precision_switches_do_not_reach_the_reference(rules_path):
    doc = smoke(ATTACKS / "tf32_switch", rules_path, "matmul", skip_static=True)
    sub = _only(doc, "matmul")
    assert not sub["passed"]
    assert sub["violations"][0].startswith("class 8 (lowered precision)"), sub["violations"]
    assert sub["error_ratio"] > 4


def test_a_version_counter_cache_earns_nothing(rules_path):
    """Every timed call is handed new contents in the same buffers: a cache keyed on identity, pointer, version and
    shape either replays a stale output (class 4) or recomputes every time (no speed-up)."""
    doc = smoke(ATTACKS / "version_cache", rules_path, "new_gelu")
    sub = _only(doc, "new_gelu")
    if sub["passed"]:
        assert sub["speedup"] < 1.5, sub
    else:
        assert sub["violations"][0].startswith("class 4 "), sub["violations"]


def test_swapping_the_reference_forward_code_fails(rules_path):
    doc = smoke(ATTACKS / "swap_forward", rules_path, "new_gelu", skip_static=True)
    sub = _only(doc, "new_gelu")
    assert not sub["passed"]
    assert sub["violations"][0].startswith("class 6 (patching the harness)"), sub["violations"]
    assert "kernels.problems.new_gelu.Model.forward" in sub["violations"][0]


def test_a_patched_timer_is_caught_by_the_judges_clock(rules_path):
    """Every call reports a thousandth of its time; the judge's clock over each call, from its gate's open to the done
    word, scores each one instead and names the lie: no percentile lets most calls report what they like."""
    doc = smoke(ATTACKS / "timer_patch", rules_path, "new_gelu", skip_static=True)
    sub = _only(doc, "new_gelu")
    assert not sub["passed"]
    assert sub["violations"][0].startswith("class 6 (patching the harness): "), sub
    assert "timed calls reported less than the judge's own clock saw" in sub["violations"][0], sub


def test_a_timer_that_lies_on_two_calls_in_three_is_caught(rules_path):
    """Issue 36's CPU demonstration against version 1: a 40 ms forward that reports 1 ms on two calls in three passed
    with a median of 1.0 ms, because class 6 looked only at the quietest quarter of the calls. Every call is bounded
    now: the lying ones are scored by the judge's clock, and so many of them name class 6."""
    doc = smoke(ATTACKS / "lying_timer", rules_path, "new_gelu", skip_static=True)
    sub = _only(doc, "new_gelu")
    assert not sub["passed"], sub
    assert "timed calls reported less than the judge's own clock saw" in sub["violations"][0], sub


def test_a_route_honest_only_on_its_first_calls_is_caught(rules_path):
    """Issue 36: a route that counts its calls and is honest only on the correctness calls (the only ones version 1's
    recorder and oracle watched) passed. The recorder now watches every call and the oracle a secret sample of the
    timed ones: the library kernel is class 9, the 16-bit product class 8."""
    doc = smoke(ATTACKS / "watched_calls", rules_path, "new_gelu", skip_static=True)
    sub = _only(doc, "new_gelu")
    assert not sub["passed"] and sub["violations"][0].startswith("class 9 (library calls)"), sub
    doc = smoke(ATTACKS / "watched_precision", rules_path, "matmul", skip_static=True)
    sub = _only(doc, "matmul")
    assert not sub["passed"] and any(v.startswith("class 8 (lowered precision)") for v in sub["violations"]), sub


def test_a_done_word_written_before_the_work_leaves_the_output_unwritten_at_the_done(rules_path):
    """The gate's done word is the judge's end mark; route code can write it early. What the judge copies at that
    moment is poisoned: the call's output was not complete when it said it was done (class 13)."""
    doc = smoke(ATTACKS / "forged_done", rules_path, "new_gelu", skip_static=True)
    sub = _only(doc, "new_gelu")
    assert not sub["passed"] and sub["violations"][0].startswith("class 13 (lazy output)"), sub


def test_a_gate_opened_early_computes_on_inputs_the_judge_has_not_drawn_yet(rules_path):
    """A call run before the judge opened its gate runs on what the slot held before the judge's draw: the judge's
    re-check against its own draw names it (class 4), and the judge's clock would not have counted it anyway."""
    doc = smoke(ATTACKS / "early_gate", rules_path, "new_gelu", skip_static=True)
    sub = _only(doc, "new_gelu")
    assert not sub["passed"] and any("does not match the reference" in v for v in sub["violations"]), sub


@pytest.mark.parametrize("attack", ["slowed_clock", "deferred_output", "precompute_on_refresh"])
def test_the_cpu_profiles_timer_is_the_judges_clock(attack, rules_path):
    """Each call is bounded by the judge's clock from its gate's open to the done word, which comes after the output
    is in the judge's region: 5 ms that the candidate's slowed clock does not see, or that a thread spends filling the
    output after forward returned, are in what scores the call (or, reported short on most calls, named class 6);
    route code that computes an answer as soon as inputs exist answers for inputs that the judge draws only once the
    call waits at its gate, and the re-check names it."""
    doc = smoke(ATTACKS / attack, rules_path, "new_gelu", skip_static=True)
    sub = _only(doc, "new_gelu")
    if not sub["passed"]:
        assert any(
            v.startswith("class 6 (patching the harness): ")
            or "class 4 (caching/replay)" in v
            or v.startswith("class 13 (lazy output)")
            for v in sub["violations"]
        ), sub
        return
    assert sub["candidate_ms"] >= 5.0, sub
    assert sub["speedup"] < 0.1, sub


def test_shrinking_the_shared_memory_cannot_crash_the_judge(tmp_path):
    """The candidate holds the descriptor of the memfd outputs cross through (on the CPU); truncated under the judge's
    copy, the judge died of SIGBUS with no metrics file. The judge seals its size before the candidate may run route
    code."""
    metrics = tmp_path / "metrics.json"
    args = [str(ATTACKS / "shrink_shared"), "--metrics", str(metrics), "--shapes", "smoke", "--device", "cpu"]
    done = run_cli(*args, "--only", "new_gelu", "--skip-static")
    assert done.returncode == 1, (done.returncode, done.stderr[-3000:])
    (violation,) = _only(json.loads(metrics.read_text()), "new_gelu")["violations"]
    assert violation.startswith("route: candidate raised PermissionError"), violation


@AS_ROOT
def test_route_code_cannot_read_a_root_only_file(tmp_path, rules_path):
    secret = Path(f"/var/lib/kb-test-secret-{secrets.token_hex(6)}")
    word = secrets.token_hex(16)
    secret.write_text(word)
    secret.chmod(0o600)
    try:
        route = tmp_path / "route"
        route.mkdir()
        source = (ATTACKS / "read_secret.py.in").read_text().replace("@SECRET@", str(secret))
        (route / "new_gelu.py").write_text(source)
        doc = smoke(route, rules_path, "new_gelu")
    finally:
        secret.unlink()
    assert word not in json.dumps(doc)
    (violation,) = _only(doc, "new_gelu")["violations"]
    assert "PermissionError" in violation, violation
    assert doc["isolation"]["candidate"]["user"] == "kb-job"


# -- routes that break their process: the problem fails naming what happened, the next problem is judged --------------
HONEST_GELU = (ROUTES / "reference" / "new_gelu.py").read_text()
BAD_FORWARDS = {
    "crashes": ("import os, signal\n", "os.kill(os.getpid(), signal.SIGSEGV)", "was killed by SIGSEGV"),
    "hangs": ("", "while True:\n            pass", "gave no answer to 'call' within the 8 s limit"),
    "exhausts memory": (
        "",
        "hog = []\n        while True:\n            hog.append(bytearray(32 << 20))",
        "its memory cap (1024 MiB)",
    ),
    "forks without end": (
        "import os, time\n",
        "while True:\n            try:\n                os.fork()\n"
        "            except OSError:\n                time.sleep(0.01)",
        "its process cap (32 processes)",
    ),
    "fills the disk": (
        "import os\n",
        "with open(os.path.join(os.environ['TMPDIR'], 'fill'), 'wb') as f:\n"
        "            while True:\n                f.write(bytes(1 << 20))",
        "No space left on device",
    ),
}


def _bad_route(directory: Path, imports: str, body: str) -> None:
    """sum_dim breaks its process; new_gelu, judged after it (the rules' order), is honest."""
    directory.mkdir()
    (directory / "sum_dim.py").write_text(
        f"{imports}import torch\n\n\nclass ModelNew(torch.nn.Module):\n"
        f"    def __init__(self, *args):\n        super().__init__()\n\n"
        f"    def forward(self, x):\n        {body}\n"
    )
    (directory / "new_gelu.py").write_text(HONEST_GELU)


@AS_ROOT
@pytest.mark.parametrize("what", sorted(BAD_FORWARDS))
def test_a_route_that_breaks_its_process_fails_that_problem_and_the_next_one_is_judged(
    what, tmp_path, rules_path, monkeypatch
):
    imports, body, named = BAD_FORWARDS[what]
    monkeypatch.setenv("KB_PROBLEM_TIME_LIMIT_S", "8")
    monkeypatch.setenv("KB_CANDIDATE_MEMORY_MB", "1024")  # torch alone takes a few hundred
    monkeypatch.setenv("KB_CANDIDATE_PIDS", "32")
    monkeypatch.setenv("KB_CANDIDATE_DISK_MB", "64")
    route = tmp_path / "route"
    _bad_route(route, imports, body)
    doc = smoke(route, rules_path, "sum_dim", "new_gelu", skip_static=True)  # the process model alone
    bad, good = _only(doc, "sum_dim"), _only(doc, "new_gelu")
    assert not bad["passed"]
    assert any(named in v for v in bad["violations"]), bad["violations"]
    assert good["passed"], good["violations"]
    assert doc["isolation"]["candidate_processes"] == (1 if what == "fills the disk" else 2)
    assert not list(Path("/sys/fs/cgroup/pids").glob(f"kb-candidate-{os.getpid()}")), "its cgroup outlived it"


# The H200 image's condition (bench/harness/isolation, every run: "no writable cgroup"): an empty tmpfs over the cgroup
# filesystem, in a mount namespace of the harness's own.
WITHOUT_CGROUPS = [
    "unshare", "--mount", "--propagation", "private", "sh", "-c",
    'mount -t tmpfs kb-no-cgroups /sys/fs/cgroup && exec "$@"', "sh",
]  # fmt: skip


@AS_ROOT
@pytest.mark.parametrize("what", ["exhausts memory", "forks without end"])
def test_where_no_cgroup_can_be_made_running_into_an_rlimit_cap_is_named_too(what, tmp_path):
    """Without a cgroup the memory and process caps are rlimits: running into one makes an allocation or a fork fail
    inside route code, not a kill the judge sees, and the reason named only the exception route code raised."""
    imports, body, _ = BAD_FORWARDS[what]
    route = tmp_path / "route"
    _bad_route(route, imports, body)
    metrics = tmp_path / "metrics.json"
    caps = {"KB_PROBLEM_TIME_LIMIT_S": "20", "KB_CANDIDATE_MEMORY_MB": "3072", "KB_CANDIDATE_PIDS": "32"}
    args = [str(route), "--metrics", str(metrics), "--shapes", "smoke", "--device", "cpu", "--skip-static"]
    done = run_cli(*args, "--only", "sum_dim", "new_gelu", env_extra=caps, wrapper=WITHOUT_CGROUPS)
    assert done.returncode == 1, (done.returncode, done.stderr[-3000:])
    doc = json.loads(metrics.read_text())
    assert doc["isolation"]["candidate"]["cgroup"] is None, doc["isolation"]
    bad, good = _only(doc, "sum_dim"), _only(doc, "new_gelu")
    named = {"exhausts memory": "its memory cap (3072 MiB", "forks without end": "its process cap (32 processes"}[what]
    assert any(named in v for v in bad["violations"]), bad["violations"]
    assert good["passed"], good["violations"]


@AS_ROOT
def test_a_candidate_that_cannot_start_under_its_memory_rlimit_is_started_again_without_it(tmp_path):
    """Without a cgroup a GPU candidate's memory cap is RLIMIT_DATA, never yet tried with the H200's CUDA: if the
    candidate cannot start under it -- only the judge's code has run in it then -- the check goes on without the cap
    and says so, rather than failing every check on that machine. Here torch itself cannot load under the CPU
    profile's RLIMIT_AS of 200 MiB."""
    metrics = tmp_path / "metrics.json"
    args = [str(ROUTES / "reference"), "--metrics", str(metrics), "--shapes", "smoke", "--device", "cpu"]
    caps = {"KB_CANDIDATE_MEMORY_MB": "200"}
    done = run_cli(*args, "--only", "new_gelu", env_extra=caps, wrapper=WITHOUT_CGROUPS)
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    candidate = json.loads(metrics.read_text())["isolation"]["candidate"]
    assert candidate["memory_rlimit"] is None, candidate
    assert any(n.startswith("the candidate could not start under RLIMIT_AS") for n in candidate["notes"]), candidate


CHATTY_SUM_DIM = """import os
import torch
from kernels.problems.sum_dim import Model


class ModelNew(Model):
    def forward(self, x):
        for fd in (1, 2):
            for _ in range(48):
                os.write(fd, bytes(1 << 20))
        os.write(2, b"the last words")
        return super().forward(x)
"""


FORKS_TO_ITS_CAP_THEN_REAPS = """import os, time
import torch


class ModelNew(torch.nn.Module):
    def __init__(self, *args):
        super().__init__()

    def forward(self, x):
        children = []
        try:
            while True:
                pid = os.fork()
                if pid == 0:
                    time.sleep(0.5)
                    os._exit(0)
                children.append(pid)
        finally:
            for pid in children:
                os.waitpid(pid, 0)
"""


@AS_ROOT
def test_a_cap_is_named_for_the_failure_that_ran_into_it_not_for_every_later_one(tmp_path, rules_path, monkeypatch):
    """A cgroup's counters never go down and the candidate outlives an error of route code: once sum_dim had run
    into its process cap, new_gelu's unrelated error was said to have run into it too."""
    monkeypatch.setenv("KB_CANDIDATE_PIDS", "32")
    route = tmp_path / "route"
    route.mkdir()
    (route / "sum_dim.py").write_text(FORKS_TO_ITS_CAP_THEN_REAPS)
    (route / "new_gelu.py").write_text(
        "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def __init__(self, *args):\n"
        "        super().__init__()\n\n    def forward(self, x):\n        raise ValueError('unrelated')\n"
    )
    doc = smoke(route, rules_path, "sum_dim", "new_gelu", skip_static=True)
    if doc["isolation"]["candidate"]["cgroup"] is None:
        pytest.skip("no cgroup here: the process cap is an rlimit, whose count is not kept")
    (forked,) = _only(doc, "sum_dim")["violations"]
    assert "BlockingIOError" in forked and forked.endswith("it ran into its process cap (32 processes)"), forked
    assert _only(doc, "new_gelu")["violations"] == ["route: candidate raised ValueError: unrelated"]
    assert doc["isolation"]["candidate_processes"] == 1


@AS_ROOT
def test_what_a_candidate_prints_reaches_the_judges_disk_only_as_a_bounded_tail(tmp_path, rules_path, monkeypatch):
    """The candidate's stdout and stderr went to a file in the judge's scratch directory, bounded only by the
    candidate's file-size cap (1 GiB) per candidate process: a route printing without end filled the judge's disk,
    the worker sandbox's 512 MiB /tmp. Here 96 MiB of output under a 16 MiB file cap: the file hit the cap and the
    candidate died of SIGXFSZ; the judge now keeps only the last of it, in memory."""
    monkeypatch.setenv("KB_CANDIDATE_FILE_MB", "16")
    monkeypatch.setenv("KB_PROBLEM_TIME_LIMIT_S", "60")
    route = tmp_path / "route"
    route.mkdir()
    (route / "sum_dim.py").write_text(CHATTY_SUM_DIM)
    doc = smoke(route, rules_path, "sum_dim", skip_static=True)
    sub = _only(doc, "sum_dim")
    assert sub["passed"], sub["violations"]
    assert doc["isolation"]["candidate_processes"] == 1


def test_the_judge_keeps_the_last_of_what_a_process_printed_and_no_more():
    printed = OutputTail(keep=4096)
    script = "import os\nfor _ in range(8): os.write(1, bytes(1 << 20))\nos.write(1, b'the last words')"
    process = subprocess.Popen([sys.executable, "-c", script], stdout=printed.write_fd)
    printed.start()
    process.wait()
    assert printed.text(1 << 20).endswith("the last words")
    assert len(printed.text(1 << 20)) <= 4096


def test_the_candidate_runs_confined_and_the_metrics_name_it(rules_path):
    doc = smoke(ROUTES / "reference", rules_path, "sum_dim")
    assert doc["passed"], doc["reasons"]
    isolation = doc["isolation"]["candidate"]
    if os.geteuid() == 0 and job_ids() is not None:
        assert isolation["user"] == "kb-job" and isolation["uid"] == job_ids()[0]
        assert isolation["bubblewrap"] == bool(shutil.which("bwrap"))
    assert all(ms > 0 for ms in isolation["gate_empty_ms"].values())


def test_the_fingerprint_of_an_output_past_2_to_the_24_elements_stays_inside_it():
    """The judge fingerprints every judged output (the class 4 explanation) by 64 spread elements; their positions,
    drawn in float32, rounded past the end from 2^24 elements on -- log_softmax's 1.6e9-element output at full shapes
    broke the H200 check with a device assert (docs/decisions/0007)."""
    size = 16_777_220  # float32 rounds size - 1 up to size
    total, picks = fingerprint(torch.arange(size, dtype=torch.int32))
    assert len(picks) == 64 and picks[0] == 0 and picks[-1] == size - 1
    assert list(picks) == sorted(set(picks)) and total == size * (size - 1) / 2


def test_the_gates_calibration_runs_empty_calls_before_route_code(rules_path):
    """What the gate's protocol costs around an empty call (the open to the done word, the judge's copy after it, the
    judge's flush while the call waits) is measured before route code is imported, at the smallest and the largest
    output, and named in the metrics."""
    doc = smoke(ROUTES / "reference", rules_path, "sum_dim")
    assert doc["passed"], doc["reasons"]
    candidate = doc["isolation"]["candidate"]
    assert len(candidate["gate_empty_ms"]) == 2 and all(v > 0 for v in candidate["gate_empty_ms"].values())
    assert all(v >= 0 for v in candidate["hold_ms"].values())
    assert doc["timing_protocol"] == "cold-device-blocking"


class _Handover:
    """One side's channel and kit around the output region: each writes down what it saw of the region when it
    synchronised and when it spoke."""

    def __init__(self, region: torch.Tensor, into: torch.Tensor | None = None):
        self.region, self.into, self.steps = region, into, []

    def sync(self):
        seen = self.into if self.into is not None else self.region
        self.steps.append(("sync", seen[:4].tolist()))

    def send(self, header):
        self.steps.append(("header", header.get("shared")))


def test_an_output_is_copied_and_waited_for_on_both_sides_before_the_other_side_moves_on():
    """On the GPU the copies into and out of the output region are device copies, asynchronous to the host: the
    candidate must have synchronised after its copy before it tells the judge (or the judge could copy out bytes not
    yet written), and the judge must wait for its own copy out before its next order (or the candidate's next output
    could land in the region under it). Neither shows on the CPU, where a copy is done when it returns."""
    region = torch.zeros(16, dtype=torch.uint8)
    output = torch.arange(1, 5, dtype=torch.float32)
    candidate = _Handover(region)
    runner = Runner.__new__(Runner)
    runner.channel = runner.kit = candidate
    runner.output_memory = region
    runner.send_output(output)
    written = output.view(torch.uint8)[:4].tolist()
    assert candidate.steps == [("sync", written), ("header", 16)]

    into = torch.zeros(16, dtype=torch.uint8)
    judge = _Handover(region, into)
    process = CandidateProcess.__new__(CandidateProcess)
    process.ctx = type("Ctx", (), {"kit": judge})()
    process.outputs = type("Outputs", (), {"tensors": [region]})()
    process.take_output(into)
    assert judge.steps == [("sync", written)]
    assert torch.equal(into, region)


def test_an_output_larger_than_the_output_region_is_a_wrong_result_with_its_shape_named(rules_path):
    """The output region holds the largest reference output of the check; a larger output is not copied into it (a
    failed copy would read as the candidate raising) and the judge names the shape it got against the reference's."""
    doc = smoke(ATTACKS / "oversized_output", rules_path, "log_softmax", skip_static=True)
    sub = _only(doc, "log_softmax")
    assert not sub["passed"], sub
    (violation,) = sub["violations"]
    assert violation.startswith("class 2 (partial work or wrong result): output is (5, 1048576) float32"), violation


def test_an_output_claimed_but_never_written_is_judged_by_the_bytes_the_judge_copies_out(rules_path):
    """Hostile hand-overs: every output is announced with the right byte count and never written into the judge's
    memory, so the region holds nothing or an earlier output. The judge compares what it copied out and names class
    2; the check goes on to its verdict."""
    doc = smoke(ATTACKS / "unwritten_output", rules_path, "log_softmax", skip_static=True)
    sub = _only(doc, "log_softmax")
    assert not sub["passed"], sub
    assert any("class 2 (" in v or v.startswith("class 13 (lazy output)") for v in sub["violations"]), sub["violations"]


def test_a_timed_calls_inputs_do_not_exist_on_the_candidate_side_before_the_go(rules_path, monkeypatch):
    """p20 and p22 on the H200: the candidate drew a timed call's inputs on the "timed" order, outside the events, and
    an answer computed then passed (p22 at 48.4x against the honest route's 27.2x: isolation/runs.md, run13; a
    bound on that order's time left a fast precompute under its slack). Now the judge writes them into the memory the
    candidate maps after its "ready": route code that answers from what the slot held before the go (here the
    wrapped draw of the warm-up, 5 ms of work a call) answers for the wrong inputs, and the re-check names it."""
    doc = smoke(ATTACKS / "precompute_on_refresh", rules_path, "new_gelu", skip_static=True)
    sub = _only(doc, "new_gelu")
    assert not sub["passed"], sub
    assert any("class 4" in v and "does not match the reference" in v for v in sub["violations"]), sub["violations"]


def test_an_honest_route_under_the_gpu_protocol_passes_with_the_judges_inputs(rules_path, monkeypatch):
    """The judge's draws into the shared region are what the candidate computes on (every re-check matches), and
    the judge's drawing and flush, with an honest candidate idle meanwhile, is not named."""
    doc = smoke(ROUTES / "reference", rules_path, "new_gelu", "log_softmax")
    assert doc["passed"], doc["reasons"]
    for sub in doc["subtasks"]:
        details = doc["details"][sub["id"]]
        assert details["judge_prepare_ms"] - details["judge_prepare_alone_ms"] < gated.PREPARE_SLACK_MS + 5.0, details


def test_the_timed_slots_memory_is_made_after_both_sides_gave_back_what_correctness_cached(rules_path, monkeypatch):
    """The slots' memory comes from outside torch's allocator, so what the judge and the candidate cached of the
    correctness calls would stay on the card beside it: at full shapes on an 80 GB H100 log_softmax's first slot ran
    out of device memory in every check (docs/decisions/0007). Per problem, the candidate is told to
    release and the judge releases its own before the first slot is made."""
    trace = []
    ask, create, release = CandidateProcess.ask, timing.Region.create.__func__, timing.release_memory

    def traced_ask(self, order, *args, **kwargs):
        trace.append(order["op"])
        return ask(self, order, *args, **kwargs)

    def traced_create(cls, *args, **kwargs):
        trace.append("region made")
        return create(cls, *args, **kwargs)

    def traced_release(device):
        trace.append("judge released")
        release(device)

    monkeypatch.setattr(CandidateProcess, "ask", traced_ask)
    monkeypatch.setattr(timing.Region, "create", classmethod(traced_create))
    monkeypatch.setattr(timing, "release_memory", traced_release)
    doc = smoke(ROUTES / "reference", rules_path, "new_gelu", "log_softmax")
    assert doc["passed"], doc["reasons"]
    loads = [i for i, op in enumerate(trace) if op == "load"]
    assert len(loads) == 2, trace
    for start in loads:
        first_slot = trace.index("region made", start)
        before = trace[start:first_slot]
        assert "release" in before and "judge released" in before, before
        assert before.index("release") < before.index("judge released"), before
