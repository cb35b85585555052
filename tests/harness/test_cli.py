"""``kb verify`` and the check script: exit codes 0/1/2 and the metrics file."""

import json
import os
import subprocess

from services.cli.main import main as kb_main
from tests.harness.conftest import CHEATS, REPO, ROUTES


def test_kb_verify_passes_the_reference_and_writes_metrics(tmp_path):
    metrics = tmp_path / "out" / "metrics.json"
    code = kb_main(
        [
            "verify",
            str(ROUTES / "reference"),
            "--metrics",
            str(metrics),
            "--shapes",
            "smoke",
            "--device",
            "cpu",
            "--only",
            "new_gelu",
            "sum_dim",
            "--rules",
            str(REPO / "scienceslack.json"),
            "--rules-commit",
            "c0ffee",
        ]
    )
    assert code == 0
    doc = json.loads(metrics.read_text())
    assert {
        "score",
        "cost",
        "subtasks",
        "runner",
        "torch",
        "triton",
        "verifier_version",
        "rules_commit",
        "passed",
        "reasons",
        "verified",
    } <= set(doc)
    assert [s["id"] for s in doc["subtasks"]] == ["sum_dim", "new_gelu"]  # the rules' order
    assert doc["rules_commit"] == "c0ffee"
    assert any("--only" in why for why in doc["not_verified_because"])


def test_a_broken_guardrail_exits_1(tmp_path, capsys):
    metrics = tmp_path / "metrics.json"
    args = [str(CHEATS / "c03_input_mutation"), "--metrics", str(metrics), "--shapes", "smoke", "--only", "new_gelu"]
    assert kb_main(["verify", *args, "--device", "cpu", "--rules", str(REPO / "scienceslack.json")]) == 1
    assert "class 3 (input mutation)" in capsys.readouterr().out
    assert json.loads(metrics.read_text())["passed"] is False


def test_full_shapes_without_a_gpu_could_not_run(tmp_path):
    metrics = tmp_path / "metrics.json"
    rules = ["--rules", str(REPO / "scienceslack.json")]
    assert kb_main(["verify", str(ROUTES / "reference"), "--metrics", str(metrics), "--device", "cpu", *rules]) == 2
    doc = json.loads(metrics.read_text())
    assert doc["could_not_run"] is True and doc["passed"] is False
    assert "full shapes need a GPU" in doc["reasons"][0]


def test_a_missing_route_dir_or_unknown_problem_could_not_run(tmp_path):
    metrics = tmp_path / "metrics.json"
    rules = ["--rules", str(REPO / "scienceslack.json")]
    assert kb_main(["verify", str(tmp_path / "nope"), "--metrics", str(metrics), "--shapes", "smoke", *rules]) == 2
    assert "does not exist" in json.loads(metrics.read_text())["reasons"][0]
    only_softmax = ["--only", "softmax", *rules]
    assert (
        kb_main(["verify", str(ROUTES / "reference"), "--metrics", str(metrics), "--shapes", "smoke", *only_softmax])
        == 2
    )
    assert "softmax" in json.loads(metrics.read_text())["reasons"][0]


def test_the_check_script_writes_the_metrics_file_the_rules_name(tmp_path):
    env = dict(
        os.environ,
        PYTHONPATH=f"{REPO}:{REPO / 'protos'}",
        TRITON_INTERPRET="1",
        KB_NO_ENTRY_POINT="1",
        KB_PYTHON=os.sys.executable,
        KB_RULES=str(REPO / "scienceslack.json"),
        KB_SHAPES="smoke",
        KB_DEVICE="cpu",
        KB_VERIFY_ARGS="--only hinge_loss",
    )
    done = subprocess.run(
        ["bash", str(REPO / "checks" / "verify.sbatch"), str(ROUTES / "honest")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads((tmp_path / "metrics.json").read_text())  # "metrics" of the check in scienceslack.json
    assert doc["passed"] is True and doc["subtasks"][0]["id"] == "hinge_loss"
