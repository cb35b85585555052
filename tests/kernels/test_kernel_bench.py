"""The benchmark script's pure parts: the table and the figures it derives from a run's raw JSON."""

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
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| problem")]
    assert [row.split(" | ")[0][2:] for row in rows] == list(bench.PROBLEM_IDS)
    speedups = [r["eager_ms"] / r["ours_ms"] for r in recorded["problems"].values()]
    geomean = math.exp(sum(map(math.log, speedups)) / len(speedups))
    assert f"**ours {geomean:.2f}×**" in text
    assert "python bench/kernels/run.py" in text
