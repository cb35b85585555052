"""One cheating route per class of BENCHMARK.md; each must fail with a reason naming its class.

Every cheat is run twice where the CPU allows: with the static pass (the default) and with --skip-static, so that the
dynamic defense behind it is shown to work on its own. Classes 5, 7 and 11 need a GPU for their dynamic defense
(side streams, the persisting-L2 limit, device-to-host copies); on the CPU only the static pass can see them, and
the GPU run under bench/harness/ exercises the rest.
"""

import json

import pytest

from services.verifier.harness.check import run_check
from tests.harness.conftest import CHEATS, run_cli

CHEAT_ROUTES = {
    1: ("c01_reused_memory", "new_gelu"),
    2: ("c02_partial_work", "hinge_loss"),
    3: ("c03_input_mutation", "new_gelu"),
    4: ("c04_caching", "new_gelu"),
    5: ("c05_side_stream", "new_gelu"),
    6: ("c06_patching", "new_gelu"),
    7: ("c07_l2_persisting", "new_gelu"),
    8: ("c08_precision", "matmul"),
    9: ("c09_library", "sum_dim"),
    10: ("c10_ignored_params", "layer_norm"),
    11: ("c11_cpu_numpy", "new_gelu"),
}
DYNAMIC_ON_CPU = [2, 3, 4, 8, 9, 10]  # class 6 too, but in its own process (it patches torch)


def _assert_fails_naming(doc: dict, cheat_class: int):
    assert doc["passed"] is False
    (sub,) = doc["subtasks"]
    assert not sub["passed"] and sub["violations"]
    assert any(f"class {cheat_class} " in v for v in sub["violations"]), sub["violations"]
    assert doc["reasons"] and all(r.startswith(sub["id"] + ": ") for r in doc["reasons"])


def test_there_is_a_cheat_for_every_class():
    assert sorted(CHEAT_ROUTES) == list(range(1, 12))
    for directory, problem_id in CHEAT_ROUTES.values():
        assert (CHEATS / directory / f"{problem_id}.py").is_file()


@pytest.mark.parametrize("cheat_class", sorted(set(CHEAT_ROUTES) - {1}))  # class 1 on the CPU: see below
def test_cheat_fails_with_its_class_named(rules_path, cheat_class):
    directory, problem_id = CHEAT_ROUTES[cheat_class]
    doc = run_check(CHEATS / directory, rules_path, shapes="smoke", device="cpu", only=[problem_id])
    _assert_fails_naming(doc, cheat_class)


@pytest.mark.parametrize("cheat_class", DYNAMIC_ON_CPU)
def test_dynamic_defense_alone_catches_the_cheat(rules_path, cheat_class):
    directory, problem_id = CHEAT_ROUTES[cheat_class]
    doc = run_check(CHEATS / directory, rules_path, shapes="smoke", device="cpu", only=[problem_id], skip_static=True)
    _assert_fails_naming(doc, cheat_class)
    assert any("static pass skipped" in why for why in doc["not_verified_because"])


@pytest.mark.parametrize("skip_static", [False, True])
def test_reused_memory_fails_on_the_cpu(rules_path, skip_static):
    """Class 1, which no static pass sees: glibc's malloc hands the poisoned block back only sometimes (it depends on
    what else the process allocated), so on the CPU the unwritten output is caught as poison (class 1) or as a wrong
    result (class 2); a full suite run has shown the second. On the GPU the caching allocator returns it every
    time: bench/harness's H200 runs name class 1."""
    directory, problem_id = CHEAT_ROUTES[1]
    doc = run_check(
        CHEATS / directory, rules_path, shapes="smoke", device="cpu", only=[problem_id], skip_static=skip_static
    )
    assert doc["passed"] is False
    (sub,) = doc["subtasks"]
    assert any(v.startswith(("class 1 ", "class 2 ")) for v in sub["violations"]), sub["violations"]


def test_patching_is_caught_by_the_identity_check_in_its_own_process(tmp_path):
    metrics = tmp_path / "metrics.json"
    done = run_cli(
        str(CHEATS / "c06_patching"),
        "--metrics",
        str(metrics),
        "--shapes",
        "smoke",
        "--device",
        "cpu",
        "--only",
        "new_gelu",
        "--skip-static",
    )
    assert done.returncode == 1, done.stderr
    doc = json.loads(metrics.read_text())
    _assert_fails_naming(doc, 6)
    assert "torch.allclose" in doc["subtasks"][0]["violations"][0]
