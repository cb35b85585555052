"""The harness reads the rules through contracts.rules (without jsonschema on the GPU machine): the guardrails it
applies, and a check that cannot run naming the field of a bad rules file."""

import json

import pytest

from contracts.rules import load_file
from services.verifier.harness.check import CouldNotRun, run_check
from tests.harness.conftest import ROUTES


def test_reads_the_guardrails_of_the_repository_rules(rules_path):
    rules = load_file(rules_path)
    assert (rules.atol, rules.rtol, rules.random_inputs) == (0.01, 0.01, 5)
    assert (rules.timing.runs, rules.timing.warmup_runs, rules.timing.l2_flush) == (100, 10, True)
    assert rules.runner_gpu == "NVIDIA H200"
    assert len(rules.kernels) == 12


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["guardrails"].pop("atol"), "rules: guardrails.atol: required field missing"),
        (lambda d: d["guardrails"]["timing"].update(runs="many"), "rules: guardrails.timing.runs: must be an integer"),
        (lambda d: d["guardrails"].update(atol=0), "rules: guardrails.atol: 0 must be greater than 0"),
    ],
)
def test_a_bad_rules_file_names_the_field(tmp_path, rules_path, mutate, message):
    doc = json.loads(rules_path.read_text())
    mutate(doc)
    path = tmp_path / "scienceslack.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(CouldNotRun) as caught:
        run_check(ROUTES / "honest", path, shapes="smoke", device="cpu")
    assert str(caught.value).startswith(message), caught.value
