"""Honest routes pass with every guardrail on: the reference itself, and a small Triton route (interpreted)."""

import json
import math

import pytest

from contracts import metrics
from contracts.metrics import VERIFIER_VERSION
from services.verifier.harness.check import run_check
from tests.harness.conftest import ROUTES


def _by_id(document):
    return {s["id"]: s for s in document["subtasks"]}


@pytest.fixture(scope="module")
def reference_document(rules_path):
    return run_check(ROUTES / "reference", rules_path, shapes="smoke", device="cpu", rules_commit="abc123")


def test_the_reference_as_a_route_passes_every_problem(reference_document):
    doc = reference_document
    assert doc["passed"] is True, doc["reasons"]
    assert doc["reasons"] == []
    assert len(doc["subtasks"]) == 12
    for sub in doc["subtasks"]:
        assert sub["passed"] and sub["submitted"], sub
        assert sub["violations"] == []
        assert sub["reference_ms"] > 0 and sub["candidate_ms"] > 0
        assert math.isfinite(sub["speedup"]) and sub["speedup"] > 0
        assert sub["error_ratio"] == pytest.approx(1.0, rel=0.5)  # the same code, the same error vs the oracle
        assert sub["max_abs_error"] <= 1e-5


def test_the_metrics_document_is_marked_as_the_cpu_profile(reference_document):
    doc = reference_document
    assert doc["verifier_version"] == VERIFIER_VERSION == 2
    assert doc["runner"] == "cpu" and doc["profile"] == "cpu" and doc["timer"] == "host"
    assert doc["verified"] is False
    assert any("CPU profile" in why for why in doc["not_verified_because"])
    assert doc["cost"] == 0.0
    assert doc["rules_commit"] == "abc123"
    assert doc["torch"] and "triton" in doc
    score = math.exp(sum(math.log(s["speedup"]) for s in doc["subtasks"]) / 12)
    assert doc["score"] == pytest.approx(score)


def test_subtasks_are_events_proto_subtask_messages(reference_document):
    """The metrics file as the verifier reads it (contracts.metrics, the CHECK profile): every subtask an events.proto
    Subtask, its noise (speedup_interval) in the message's own fields."""
    parsed = metrics.parse(json.dumps(reference_document), metrics.CHECK)
    assert [s.id for s in parsed.subtasks] == [s["id"] for s in reference_document["subtasks"]]
    for message in parsed.subtasks:
        if message.submitted:
            assert 0 < message.speedup_low <= message.speedup <= message.speedup_high


def test_an_honest_triton_route_passes_and_missing_problems_count_as_the_baseline(rules_path):
    doc = run_check(ROUTES / "honest", rules_path, shapes="smoke", device="cpu")
    assert doc["passed"] is True, doc["reasons"]
    subs = _by_id(doc)
    for pid in ("new_gelu", "hinge_loss"):
        assert subs[pid]["submitted"] and subs[pid]["passed"]
        assert subs[pid]["error_ratio"] < 4
    missing = [s for s in doc["subtasks"] if not s["submitted"]]
    assert len(missing) == 10
    assert all(s["speedup"] == 1.0 and s["passed"] for s in missing)
    expected = math.exp((math.log(subs["new_gelu"]["speedup"]) + math.log(subs["hinge_loss"]["speedup"])) / 12)
    assert doc["score"] == pytest.approx(expected)


def test_a_route_file_that_fails_to_import_breaks_a_guardrail(tmp_path, rules_path):
    (tmp_path / "new_gelu.py").write_text("raise ImportError('no such kernel')\n")
    (tmp_path / "hinge_loss.py").write_text("import torch\n\nclass NotIt(torch.nn.Module):\n    pass\n")
    doc = run_check(tmp_path, rules_path, shapes="smoke", device="cpu", only=["new_gelu", "hinge_loss"])
    assert doc["passed"] is False
    subs = _by_id(doc)
    assert subs["new_gelu"]["violations"] == ["route: new_gelu.py failed to import: ImportError: no such kernel"]
    assert subs["hinge_loss"]["violations"] == ["route: hinge_loss.py defines no ModelNew"]


def test_a_model_new_with_other_parameter_names_is_class_10(tmp_path, rules_path):
    (tmp_path / "layer_norm.py").write_text(
        "import torch.nn as nn\n\n"
        "class ModelNew(nn.Module):\n"
        "    def __init__(self, normalized_shape):\n"
        "        super().__init__()\n"
        "        self.norm = nn.LayerNorm(normalized_shape)\n\n"
        "    def forward(self, x):\n"
        "        return self.norm(x)\n"
    )
    doc = run_check(tmp_path, rules_path, shapes="smoke", device="cpu", only=["layer_norm"])
    (violation,) = doc["subtasks"][0]["violations"]
    assert violation.startswith("class 10 (ignored parameters)") and "ln.weight" in violation
