"""scienceslack.json validation: the project's own file passes; each kind of bad input names its field, and the
stdlib reader (the harness's, without jsonschema) names exactly what jsonschema names, in the same order."""

import copy
import json
from pathlib import Path

import jsonschema
import pytest

from contracts.rules import (
    COLD_DEVICE_BLOCKING,
    COLD_HOST_LAUNCH,
    SCHEMA_PATH,
    TIMING_PROTOCOLS,
    RulesError,
    load_file,
    parse,
    schema,
    validate,
)

REFERENCE = Path(__file__).resolve().parents[2] / "scienceslack.json"


@pytest.fixture
def rules_dict():
    return json.loads(REFERENCE.read_text())


def errors_of(data) -> tuple[str, ...]:
    """What parse says of ``data``, after checking that both readers say exactly that."""
    with pytest.raises(RulesError) as caught:
        parse(data)
    if not isinstance(data, str) or caught.value.errors[0].startswith("scienceslack.json: not valid JSON"):
        document = data if not isinstance(data, str) else None
    else:
        document = json.loads(data)
    if document is not None:
        by_reader = []
        for use_jsonschema in (True, False):
            with pytest.raises(RulesError) as each:
                validate(document, use_jsonschema=use_jsonschema)
            by_reader.append(each.value.errors)
        assert by_reader[0] == by_reader[1] == caught.value.errors
    return caught.value.errors


def test_schema_is_valid_draft_2020_12():
    jsonschema.Draft202012Validator.check_schema(json.loads(SCHEMA_PATH.read_text()))


def test_reference_file_loads_into_the_view():
    rules = load_file(REFERENCE)
    assert rules.benchmark_version == 2 and rules.verifier_versions == (2,) and rules.status == "active"
    assert len(rules.kernels) == 12 and "matmul" in rules.kernels
    assert rules.atol == 0.01 and rules.rtol == 0.01 and rules.random_inputs == 5
    assert rules.timing.statistic == "median" and rules.timing.l2_flush is True
    assert rules.timing.protocol == COLD_DEVICE_BLOCKING
    assert rules.check("verify").script == "checks/verify.sbatch"
    assert (rules.check("verify").partition, rules.check("verify").gres, rules.check("verify").gpus) == (
        "runners",
        "gpu:1",
        1,
    )
    assert rules.check("verify").supersede is False  # every push judged unless the rules say otherwise
    assert rules.runner_partitions == {"runners"}
    assert rules.partitions["main"].max_time_s == 3600 and rules.partitions["main"].gpus == 0
    assert rules.maintainers == ("curator",)
    assert rules.raw["benchmark"]["name"] == "KernelBench operators"
    with pytest.raises(KeyError, match="no check named 'lint'"):
        rules.check("lint")


def test_the_timing_protocol_is_named_one_of_the_known_ones(rules_dict):
    """guardrails.timing.protocol: one of TIMING_PROTOCOLS, the schema's enum; rules that name none (version 1's,
    approved before the field) time by version 1's rule."""
    assert set(schema()["properties"]["guardrails"]["properties"]["timing"]["properties"]["protocol"]["enum"]) == set(
        TIMING_PROTOCOLS
    )
    rules_dict["guardrails"]["timing"]["protocol"] = "warm"
    assert errors_of(rules_dict) == (
        "guardrails.timing.protocol: 'warm' is not one of cold-host-launch, cold-device-blocking",
    )
    rules_dict["guardrails"]["timing"]["protocol"] = 2
    assert errors_of(rules_dict) == (
        "guardrails.timing.protocol: 2 is not one of cold-host-launch, cold-device-blocking",
    )
    del rules_dict["guardrails"]["timing"]["protocol"]
    assert parse(rules_dict).timing.protocol == COLD_HOST_LAUNCH


def test_the_earlier_versions_rules_still_read():
    from services.ingest.seed import EARLIER_RULES, PROJECT

    earlier = [load_file(PROJECT / path) for path in EARLIER_RULES]
    assert [r.benchmark_version for r in earlier] == list(range(1, len(earlier) + 1))
    assert earlier[0].timing.protocol == COLD_HOST_LAUNCH and earlier[0].verifier_versions == (1,)


def test_view_is_frozen():
    rules = load_file(REFERENCE)
    with pytest.raises(AttributeError):
        rules.atol = 1.0
    with pytest.raises(TypeError):
        rules.partitions["other"] = rules.partitions["main"]


def test_missing_kernel_is_named(rules_dict):
    rules_dict["benchmark"]["kernels"].remove("kl_div")
    assert errors_of(rules_dict) == ("benchmark.kernels: missing 'kl_div'",)


def test_unknown_or_repeated_kernel(rules_dict):
    rules_dict["benchmark"]["kernels"][0] = "conv2d"
    rules_dict["benchmark"]["kernels"].append("log_softmax")
    errors = errors_of(rules_dict)
    assert any(e.startswith("benchmark.kernels[0]: 'conv2d' is not one of matmul,") for e in errors)
    assert "benchmark.kernels: missing 'matmul'" in errors
    assert "benchmark.kernels: repeats log_softmax" in errors


def test_extra_key_refused_at_any_depth(rules_dict):
    rules_dict["colour"] = "blue"
    rules_dict["guardrails"]["timing"]["jitter"] = 0
    assert errors_of(rules_dict) == ("colour: unknown key", "guardrails.timing.jitter: unknown key")


def test_negative_atol(rules_dict):
    rules_dict["guardrails"]["atol"] = -1
    assert errors_of(rules_dict) == ("guardrails.atol: -1 must be greater than 0",)


def test_wrong_types(rules_dict):
    rules_dict["benchmark"]["version"] = "1"
    rules_dict["guardrails"]["timing"]["l2_flush"] = "yes"
    rules_dict["guardrails"]["random_inputs"] = True
    assert errors_of(rules_dict) == (
        "benchmark.version: must be an integer, got string '1'",
        "guardrails.random_inputs: must be an integer, got boolean True",
        "guardrails.timing.l2_flush: must be a boolean, got string 'yes'",
    )


def test_minimums(rules_dict):
    rules_dict["benchmark"]["version"] = 0
    rules_dict["guardrails"]["random_inputs"] = 4
    assert errors_of(rules_dict) == (
        "benchmark.version: 0 is less than the minimum of 1",
        "guardrails.random_inputs: 4 is less than the minimum of 5",
    )


def test_unknown_status(rules_dict):
    rules_dict["benchmark"]["status"] = "retired"
    assert errors_of(rules_dict) == (
        "benchmark.status: 'retired' is not one of active, quiet, saturated, superseded, flawed",
    )


def test_empty_maintainers(rules_dict):
    rules_dict["maintainers"] = []
    assert errors_of(rules_dict) == ("maintainers: must not be empty",)


def test_malformed_json():
    errors = errors_of('{"benchmark": {"name": "x",}')
    assert len(errors) == 1 and errors[0].startswith("scienceslack.json: not valid JSON: ")
    assert errors_of("[1, 2]") == ("(top level): must be an object, got array [1, 2]",)


def test_missing_fields_are_each_named(rules_dict):
    del rules_dict["limits"]["partitions"]["main"]["gpus"]
    del rules_dict["checks"][0]["time_limit_s"]
    del rules_dict["maintainers"]
    assert errors_of(rules_dict) == (
        "maintainers: required field missing",
        "checks[0].time_limit_s: required field missing",
        "limits.partitions.main.gpus: required field missing",
    )


def test_check_script_must_stay_under_checks(rules_dict):
    for script in ("verify.sbatch", "checks/../etc/passwd", "/checks/verify.sbatch", "checks/./x", "checks/"):
        bad = copy.deepcopy(rules_dict)
        bad["checks"][0]["script"] = script
        (error,) = errors_of(bad)
        assert error.startswith(f"checks[0].script: {script!r} must be a file path under checks/"), error
    rules_dict["checks"][0]["script"] = "checks/gpu/verify.v2.sbatch"
    assert parse(rules_dict).checks[0].script == "checks/gpu/verify.v2.sbatch"


def test_metrics_is_a_file_name(rules_dict):
    rules_dict["checks"][0]["metrics"] = "../metrics.json"
    (error,) = errors_of(rules_dict)
    assert error.startswith("checks[0].metrics: '../metrics.json' must be a plain file name")


def test_consistency_duplicate_checks_and_default_time(rules_dict):
    rules_dict["checks"].append(dict(rules_dict["checks"][0]))
    rules_dict["limits"]["partitions"]["main"]["default_time_s"] = 7200
    assert errors_of(rules_dict) == (
        "checks[1].name: duplicate check name 'verify'",
        "limits.partitions.main.default_time_s: 7200 exceeds max_time_s 3600",
    )


def test_a_check_runs_on_a_known_partition_within_its_gpus(rules_dict):
    rules_dict["checks"][0]["partition"] = "gpu"
    assert errors_of(rules_dict) == ("checks[0].partition: 'gpu' is not one of limits.partitions (main, runners)",)
    rules_dict["checks"][0]["partition"] = "runners"
    rules_dict["checks"][0]["gres"] = "gpu:h200:2"
    assert errors_of(rules_dict) == (
        "checks[0].gres: gpu:h200:2 asks for 2 GPUs, more than limits.partitions.runners.gpus (1)",
    )
    rules_dict["checks"][0]["gres"] = "gpu:0"
    (error,) = errors_of(rules_dict)
    assert error == "checks[0].gres: 'gpu:0' must be gpu:N or gpu:TYPE:N (N from 1 to 99)"
    del rules_dict["checks"][0]["partition"]
    rules_dict["checks"][0]["gres"] = "gpu:1"
    assert errors_of(rules_dict) == ("checks[0].gres: a check asks for GPUs only on a partition (checks[0].partition)",)
    rules_dict["checks"][0]["supersede"] = "yes"
    (error,) = errors_of(rules_dict)
    assert error.startswith("checks[0].supersede: must be a boolean")


def test_bad_partition_name_and_empty_partitions(rules_dict):
    rules_dict["limits"]["partitions"]["GPU big"] = rules_dict["limits"]["partitions"]["main"]
    (error,) = errors_of(rules_dict)
    assert error.startswith("limits.partitions.GPU big: a partition name must be lowercase")
    rules_dict["limits"]["partitions"] = {}
    assert errors_of(rules_dict) == ("limits.partitions: must not be empty",)


def test_all_errors_listed_in_the_message(rules_dict):
    rules_dict["guardrails"]["atol"] = 0
    rules_dict["guardrails"]["rtol"] = -0.5
    rules_dict["maintainers"] = []
    with pytest.raises(RulesError) as caught:
        parse(json.dumps(rules_dict))
    assert str(caught.value) == (
        "guardrails.atol: 0 must be greater than 0; guardrails.rtol: -0.5 must be greater than 0; "
        "maintainers: must not be empty"
    )


def test_without_jsonschema_the_same_rules_and_the_same_errors(tmp_path, rules_dict):
    """The GPU harness has no jsonschema: importing contracts.rules, validating and building the view must not need
    it, and give what the services get."""
    import subprocess
    import sys

    blocker = tmp_path / "jsonschema.py"
    blocker.write_text("raise ImportError('jsonschema is not installed here')\n")
    broken = copy.deepcopy(rules_dict)
    broken["guardrails"]["atol"] = 0
    del broken["maintainers"]
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    code = (
        "import sys; from contracts.rules import RulesError, load_file\n"
        f"r = load_file({str(REFERENCE)!r}); print(r.benchmark_version, len(r.kernels), r.maintainers[0])\n"
        f"try: load_file({str(tmp_path / 'broken.json')!r})\n"
        "except RulesError as err: print(err)\n"
        "print('jsonschema' in sys.modules)"
    )
    repo = REFERENCE.parent
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": f"{tmp_path}:{repo}"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.splitlines() == [
        "2 12 curator",
        "maintainers: required field missing; guardrails.atol: 0 must be greater than 0",
        "False",
    ]
    assert errors_of(broken) == ("maintainers: required field missing", "guardrails.atol: 0 must be greater than 0")


def leaf_and_object_paths(value, path=()):
    """Every key path in the document: (path, value) for each field, objects included."""
    if isinstance(value, dict):
        for key, child in value.items():
            yield (*path, key), child
            yield from leaf_and_object_paths(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from leaf_and_object_paths(child, (*path, index))


def at(document, path):
    for part in path:
        document = document[part]
    return document


def dotted(path) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def test_every_required_field_removed_is_named(rules_dict):
    """Each field of the reference is required (partition names aside, the timing protocol, which rules approved
    before it existed leave out, and where a check runs): dropping any one names exactly it."""
    optional = {
        ("limits", "partitions", "main"),
        ("limits", "partitions", "runners"),
        ("guardrails", "timing", "protocol"),
        ("checks", 0, "partition"),
        ("checks", 0, "gres"),
    }
    paths = [path for path, _ in leaf_and_object_paths(rules_dict) if path not in optional]
    assert len(paths) == 39
    for path in paths:
        broken = copy.deepcopy(rules_dict)
        del at(broken, path[:-1])[path[-1]]
        assert errors_of(broken) == (f"{dotted(path)}: required field missing",), path


def test_an_unknown_key_in_any_object_is_named(rules_dict):
    objects = [path for path, value in leaf_and_object_paths(rules_dict) if isinstance(value, dict)]
    objects = [(), *[path for path in objects if path != ("limits", "partitions")]]
    for path in objects:
        broken = copy.deepcopy(rules_dict)
        at(broken, path)["surprise"] = 1
        assert errors_of(broken) == (f"{dotted((*path, 'surprise'))}: unknown key",), path
