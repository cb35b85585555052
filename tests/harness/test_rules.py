import json

import pytest

from services.verifier.harness.rules import RulesFileError, load_harness_rules


def test_reads_the_guardrails_of_the_repository_rules(rules_path):
    rules = load_harness_rules(rules_path)
    assert (rules.atol, rules.rtol, rules.random_inputs) == (0.01, 0.01, 5)
    assert (rules.runs, rules.warmup_runs, rules.l2_flush) == (100, 10, True)
    assert rules.runner_gpu == "NVIDIA H200"
    assert len(rules.kernels) == 12


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["guardrails"].pop("atol"), "guardrails.atol is missing"),
        (lambda d: d["guardrails"]["timing"].update(runs="many"), "guardrails.timing.runs must be int"),
        (lambda d: d["guardrails"].update(atol=0), "guardrails.atol must be > 0"),
    ],
)
def test_a_bad_rules_file_names_the_field(tmp_path, rules_path, mutate, message):
    doc = json.loads(rules_path.read_text())
    mutate(doc)
    path = tmp_path / "scienceslack.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(RulesFileError, match=message.replace(".", r"\.")):
        load_harness_rules(path)
