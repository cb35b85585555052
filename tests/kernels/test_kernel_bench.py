"""The benchmark script's pure parts: the table and the figures it derives from a run's raw JSON."""

import importlib
import importlib.util
import json
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("kernels_bench_run", ROOT / "bench" / "kernels" / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def recorded() -> dict:
    return json.loads((ROOT / "kernels" / "results" / "h200.json").read_text())


def test_recorded_run_covers_all_problems_and_passed(bench, recorded):
    assert set(recorded["problems"]) == set(bench.PROBLEM_IDS)
    for rec in recorded["problems"].values():
        assert rec["passed"], rec["id"]
        assert all(c["allclose"] and c["inputs_unchanged"] for c in rec["checks"]), rec["id"]
        assert "compile_ms" in rec, rec["id"]


def test_derive_recomputes_the_recorded_ratios(bench, recorded):
    for rec in recorded["problems"].values():
        again = {k: rec[k] for k in ("id", "eager_ms", "compile_ms", "ours_ms", "floor_ms", "floor_bytes")}
        bench.derive(again)
        for key in ("speedup_eager", "speedup_compile", "gb_per_s", "fraction_of_floor"):
            assert again[key] == pytest.approx(rec[key]), (rec["id"], key)


def test_render_has_one_row_per_problem_and_the_geomean(bench, recorded):
    text = bench.render(recorded)
    busy, idle = text.split("Timed from an idle GPU")

    def row_ids(part):
        return [
            line.split(" | ")[0][2:] for line in part.splitlines() if line.startswith("| ") and "problem" not in line
        ]

    assert row_ids(busy) == list(bench.PROBLEM_IDS)
    # the idle table: every problem the recorded run timed from idle (matmul's record predates it)
    assert row_ids(idle) == [p for p in bench.PROBLEM_IDS if "ours_idle_ms" in recorded["problems"][p]]
    assert len(row_ids(idle)) == 11
    idle_speedups = [
        r["eager_idle_ms"] / r["ours_idle_ms"] for r in recorded["problems"].values() if "ours_idle_ms" in r
    ]
    assert f"**ours {math.exp(sum(map(math.log, idle_speedups)) / len(idle_speedups)):.2f}×**" in idle
    speedups = [r["eager_ms"] / r["ours_ms"] for r in recorded["problems"].values()]
    geomean = math.exp(sum(map(math.log, speedups)) / len(speedups))
    assert f"**ours {geomean:.2f}×**" in text
    assert "python bench/kernels/run.py" in text


def test_a_failing_variant_leaves_the_shipped_version_selected(bench):
    """A variant that cannot build (on the H200: a TMA config over the shared-memory limit) must not stay selected,
    or the shipped version's timing after it runs the broken variant and the problem's whole record is lost."""
    import torch
    import triton

    problem = importlib.import_module("kernels.problems.kl_div")
    route = importlib.import_module("kernels.triton.kl_div")
    if not route._INTERPRET:
        route = importlib.reload(route)
    bench.SHAPE, bench.DEVICE = "smoke", "cpu"
    ref, ours = bench.make_models(problem, route, torch.device("cpu"), seed=1)
    route.VARIANTS["unbuildable"] = {"BLOCK": 100, "num_warps": 4, "programs_per_sm": 1}  # not a power of two
    try:
        with pytest.raises(triton.errors.TritonError):
            bench.check_once(problem, ref, ours, torch.device("cpu"), 5, "unbuildable")
        assert ours.variant is None
        assert bench.check_once(problem, ref, ours, torch.device("cpu"), 6, None)["allclose"]
    finally:
        del route.VARIANTS["unbuildable"]
        bench.SHAPE, bench.DEVICE = "full", "cuda"


def test_the_chosen_config_is_recorded_and_rendered(bench, recorded):
    """A fixed route records its VARIANTS["default"]; an autotuned one (new_gelu) what its autotuner picked."""
    fixed = importlib.import_module("kernels.triton.cross_entropy")
    assert bench.chosen_config(fixed) == {"fixed": fixed.VARIANTS["default"]}
    tuned = importlib.import_module("kernels.triton.new_gelu")
    assert bench.chosen_config(tuned) == {"autotuned": tuned.chosen_configs()}
    run = json.loads(json.dumps(recorded))
    run["problems"]["cross_entropy"]["chosen_config"] = bench.chosen_config(fixed)
    text = bench.render(run)
    assert "| cross_entropy | 32768 × 4096 | `" in text and '"mode": "persistent"' in text
