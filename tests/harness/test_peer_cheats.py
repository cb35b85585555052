"""The peer suite (issue 13, item 6): cheats after the public exploit collections -- gpu-mode/pygpubench's
``exploits/`` and gpu-mode/reference-kernels #104 and #162 -- written anew as routes in tests/harness/cheats/p*.

Every route runs the way the check script runs the harness (its own ``python -m services.verifier.harness`` process,
so that what a cheat does to its process stays there), on the CPU profile at smoke shapes, with ``--skip-static``:
the dynamic defenses alone must stop it. "Stop" means one of two things, and each test says which it accepts:
- *named*: the check fails and a violation names the cheat's class;
- *neutralised* (only for cheats whose whole effect is on the measurement -- slowing the reference, caching,
  patching a clock or a statistic, work hidden from the timer): either named, or the check passes with a speed-up no
  larger than honest work gets (``HONEST_SPEEDUP_BOUND``); against the in-process harness these cheats fabricated
  4.8x to inf.
The table of classes, defenses and tests is tests/harness/cheats/README.md; p16 (L2 persistence) and the side-stream
half of p14 need a GPU: bench/harness/peer_gpu.sh runs them on the H200.
"""

import json
import math
import os
import secrets
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from tests.harness.conftest import CHEATS, run_cli

HONEST_SPEEDUP_BOUND = 3.0  # CPU smoke timings of the same work differ by less than this, even on a loaded machine


def _check(route: str, problem: str, tmp_path: Path, env_extra: dict | None = None, name: str = "metrics.json"):
    metrics = tmp_path / name
    done = run_cli(
        str(CHEATS / route),
        "--metrics",
        str(metrics),
        "--shapes",
        "smoke",
        "--device",
        "cpu",
        "--only",
        problem,
        "--skip-static",
        env_extra=env_extra,
        timeout=300,
    )
    doc = json.loads(metrics.read_text()) if metrics.is_file() else None
    return done, doc


def _violations(doc: dict) -> list[str]:
    return [v for sub in doc["subtasks"] for v in sub["violations"]]


def _assert_named(done, doc, *classes: int):
    """Failed, exit 1, and a violation names one of ``classes``."""
    assert doc is not None, done.stderr[-2000:]
    assert done.returncode == 1, (done.returncode, doc.get("reasons"), done.stderr[-2000:])
    assert doc["passed"] is False and doc["verified"] is False
    found = _violations(doc)
    assert any(v.startswith(f"class {c} ") or f"class {c} (" in v for v in found for c in classes), found
    assert any("static pass skipped" in why for why in doc["not_verified_because"])


def _assert_named_or_neutralised(done, doc, *classes: int):
    assert doc is not None, done.stderr[-2000:]
    if doc["passed"]:
        (sub,) = doc["subtasks"]
        assert done.returncode == 0
        assert math.isfinite(doc["score"]) and math.isfinite(sub["speedup"]), sub
        assert 0 < sub["speedup"] < HONEST_SPEEDUP_BOUND, (
            f"the cheat passed with a fabricated speed-up of {sub['speedup']:.2f} "
            f"(reference {sub['reference_ms']:.4f} ms, candidate {sub['candidate_ms']:.4f} ms)"
        )
    else:
        _assert_named(done, doc, *classes)


# -- verdict forgery and process exit -------------------------------------------------------------------------------


def _assert_forgery_failed(done, doc):
    assert done.returncode != 0, "the forged verdict and exit 0 were taken as a pass"
    assert doc is not None, "no metrics file: the harness's own verdict was lost"
    assert "forged_by" not in doc and doc["passed"] is False and doc["verified"] is False, doc
    assert doc["score"] != 99.0 and doc["score"] != 42.0
    found = _violations(doc)
    assert any(v.startswith("route:") and "process" in v for v in found), found


def test_p01_verdict_forged_at_import_then_exec_true_fails(tmp_path):
    done, doc = _check("p01_verdict_forgery", "huber_loss", tmp_path)
    _assert_forgery_failed(done, doc)


def test_p02_verdict_forged_in_forward_then_exit_0_fails(tmp_path):
    done, doc = _check("p02_exit_in_forward", "hinge_loss", tmp_path)
    _assert_forgery_failed(done, doc)


def test_p19_a_forged_reply_on_the_result_channel_is_class_6(tmp_path):
    done, doc = _check("p19_channel_forgery", "sum_dim", tmp_path)
    _assert_named(done, doc, 6)
    assert "could_not_run" not in doc  # the route's doing, not the harness's: a failed check, exit 1


# -- the reference out of reach -------------------------------------------------------------------------------------


def test_p03_reference_slowed_through_torch_library_gains_nothing(tmp_path):
    _assert_named_or_neutralised(*_check("p03_library_slowdown", "matmul", tmp_path), 6, 9)


def test_p04_precision_lowered_for_the_whole_process_is_class_8(tmp_path):
    _assert_named(*_check("p04_dispatcher_precision", "matmul", tmp_path), 8)


def test_p05_precision_switches_are_class_8(tmp_path):
    _assert_named(*_check("p05_tf32_switches", "matmul", tmp_path), 8)


def test_p07_reference_code_object_swapped_gains_nothing(tmp_path):
    _assert_named_or_neutralised(*_check("p07_code_swap", "rms_norm", tmp_path), 6)


def test_p17_answer_copied_from_the_references_output_is_class_1_or_2(tmp_path):
    _assert_named(*_check("p17_gc_answer_copy", "cumsum_reverse", tmp_path), 1, 2)


# -- caches and replay ----------------------------------------------------------------------------------------------


def test_p06_cache_keyed_on_the_version_counter_gains_nothing(tmp_path):
    _assert_named_or_neutralised(*_check("p06_version_cache", "new_gelu", tmp_path), 4)


def test_p08_batch_and_skip_gains_nothing(tmp_path):
    _assert_named_or_neutralised(*_check("p08_batch_and_skip", "log_softmax", tmp_path), 4)


def _replay_files() -> list[Path]:
    name = "kb-replay-kl_div.pt"
    return [Path(tempfile.gettempdir()) / name, Path.home() / name, CHEATS / "p12_file_replay" / name]


def test_p12_outputs_replayed_from_an_earlier_run_are_class_4_or_never_seen(tmp_path):
    for place in _replay_files():
        place.unlink(missing_ok=True)
    try:
        first, first_doc = _check("p12_file_replay", "kl_div", tmp_path, name="first.json")
        assert first_doc is not None and first_doc["passed"], first.stderr[-2000:]  # run 1 computes honestly
        left_behind = [p for p in _replay_files() if p.exists()]
        second, second_doc = _check("p12_file_replay", "kl_div", tmp_path, name="second.json")
        if left_behind:
            _assert_named(second, second_doc, 4)
        else:  # its box kept nothing from run 1: run 2 computes honestly too
            assert second_doc["passed"], second_doc["reasons"]
    finally:
        for place in _replay_files():
            place.unlink(missing_ok=True)


# -- lazy outputs, timers, statistics -------------------------------------------------------------------------------


def test_p09_lazy_subclass_output_is_class_6(tmp_path):
    _assert_named(*_check("p09_lazy_subclass", "log_softmax", tmp_path), 6)


def test_p10_patched_clocks_gain_nothing(tmp_path):
    _assert_named_or_neutralised(*_check("p10_timer_patch", "new_gelu", tmp_path), 6)


def test_p11_patched_median_underflowing_the_score_gains_nothing(tmp_path):
    _assert_named_or_neutralised(*_check("p11_statistics_underflow", "layer_norm", tmp_path), 6)


def test_p18_patched_clocks_with_the_snapshot_blinded_gain_nothing(tmp_path):
    _assert_named_or_neutralised(*_check("p18_blinded_timer_patch", "new_gelu", tmp_path), 6)


# -- work the timer does not see, partial work -----------------------------------------------------------------------


def test_p14_work_on_a_thread_started_at_import_gains_nothing(tmp_path):
    """Its thread is older than every per-call thread count and its snapshot is blinded, so on the CPU nothing names
    it; the work it does after forward returned is inside the judge's clock, which stops only once the output exists
    (test_process_model.py's deferred_output shows that with 5 ms of it). On a GPU its side stream is class 5."""
    _assert_named_or_neutralised(*_check("p14_worker_thread", "new_gelu", tmp_path), 5, 1, 2, 6)


def test_p15_partial_logsumexp_within_a_loose_tolerance_is_class_2(tmp_path):
    _assert_named(*_check("p15_partial_logsumexp", "cross_entropy", tmp_path), 2)


def test_p21_a_library_call_is_named_where_it_runs_eagerly(tmp_path):
    """On the CPU there is no CUDA graph to hide aten::gelu in, and the dispatch recorder names it. On a GPU the route
    replays it from a graph captured at import, which no recorded call dispatches; the kernel census names its GELU
    kernel by what it computes (test_recorder.py::test_p21_...; on the H200: bench/harness/isolation/runs.md, run10)."""
    _assert_named(*_check("p21_graph_hidden_library", "new_gelu", tmp_path), 9)


def test_p22_an_answer_precomputed_on_the_draw_gains_nothing_where_the_seed_comes_with_the_go(tmp_path):
    """p20 handing back a copy of its precomputed answer, which on the GPU cost about the floor while the candidate
    drew a timed call's inputs before the go (48.4x: cheats README; the GPU's protocol now: test_process_model.py::
    test_a_timed_calls_inputs_do_not_exist_on_the_candidate_side_before_the_go). On the CPU the seed of a timed
    call's inputs comes with the go: the wrapped draw, and the precompute with it, run inside the judge's clock:
    neutralised, or named by it (class 6) where the precompute (the project's kernel, interpreted here) takes far
    longer than the call the candidate reports."""
    _assert_named_or_neutralised(*_check("p22_precompute_then_copy", "layer_norm", tmp_path), 4, 6)


# -- confinement ----------------------------------------------------------------------------------------------------


@pytest.fixture
def root_only_secret():
    """A 0600 root-owned file in a world-readable folder the candidate's read-only view of the host still shows
    (/tmp, /var/tmp and /root get empty tmpfs there): only its uid can keep the candidate out."""
    folder = Path(tempfile.mkdtemp(prefix="kb-root-only-", dir="/var/lib"))
    folder.chmod(0o755)
    secret = folder / "secret"
    token = "kb-secret-" + secrets.token_hex(12)
    secret.write_text(token + "\n")
    secret.chmod(stat.S_IRUSR | stat.S_IWUSR)
    yield secret, token
    shutil.rmtree(folder, ignore_errors=True)


def test_p13_a_root_only_file_never_reaches_the_failure_reasons(tmp_path, root_only_secret):
    assert os.geteuid() == 0, "the test needs root to make a root-only file"
    secret, token = root_only_secret
    done, doc = _check(
        "p13_root_only_file", "triplet_margin_loss", tmp_path, env_extra={"KB_CHEAT_SECRET_FILE": str(secret)}
    )
    assert doc is not None and doc["passed"] is False, done.stderr[-2000:]
    everything = json.dumps(doc) + done.stdout + done.stderr
    assert token not in everything
    shadow = Path("/etc/shadow")
    if shadow.is_file():
        first_line = shadow.read_text().splitlines()[0]
        assert first_line[:20] not in everything
