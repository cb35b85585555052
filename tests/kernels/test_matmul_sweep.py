"""The matmul sweep (bench/kernels/matmul_sweep.py) on the CPU: every candidate config computes A @ B to fp32
accuracy under the interpreter at awkward shapes, fits the H200's shared memory by arithmetic, and the sweep's
process pool records a failing or hanging candidate and goes on."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.kernels import matmul_sweep as sweep
from kernels.triton.matmul import VARIANTS, config

ROOT = Path(__file__).resolve().parents[2]


def test_every_candidate_and_variant_fits_the_h200_shared_memory():
    for name, cfg in {**sweep.candidates(), **VARIANTS}.items():
        assert sweep.smem_estimate(cfg) <= sweep.H200_SMEM_BYTES, name


def test_config_call_rebuilds_each_candidate():
    """The sweep names a winner by the config(...) call that ships it: that call must give back the same config."""
    for name, cfg in sweep.candidates().items():
        assert eval(sweep.config_call(cfg), {"config": config}) == cfg, name


def test_smoke_sweep_every_candidate_is_right(tmp_path):
    """The whole sweep under the interpreter: each candidate checked at the three smoke shapes (partial tiles at every
    edge, K not a multiple of 4, whole tiles), then the timing phases' code at a small shape."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    cmd = [sys.executable, str(ROOT / "bench/kernels/matmul_sweep.py"), "--smoke", "--out", str(tmp_path)]
    cmd += ["--workers", "2", "--runs", "1", "--rounds", "1", "--top", "2", "--budget-s", "1500"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads((tmp_path / "matmul_sweep.json").read_text())
    assert set(data["candidates"]) == set(sweep.candidates())
    for name, rec in data["candidates"].items():
        cases = rec["check"]["cases"]
        assert [c["shape"] for c in cases] == [list(s) for s in sweep.SMOKE_SHAPES], name
        assert all(c["ok"] and not c["nan"] for c in cases), (name, cases)
    timed = [n for n, rec in data["candidates"].items() if "timing" in rec]
    assert timed and all(data["candidates"][n]["timing"]["total_ms"] > 0 for n in timed)
    assert len(data["final"]) >= 2 and "baselines" in data
    assert "| candidate | total |" in (tmp_path / "matmul_sweep.md").read_text()


@pytest.fixture
def results():
    recorded: dict = {}
    return recorded, lambda name, rec: recorded.__setitem__(name, rec)


def test_a_failing_candidate_is_recorded_and_the_next_one_runs(results):
    recorded, on_result = results
    broken = config(bm=100)  # not a power of two: Triton refuses to build it
    tasks = [("broken", "check", broken), ("fine", "check", VARIANTS["interpret"])]
    sweep.run_tasks(tasks, 1, True, 300, float("inf"), on_result)
    assert not recorded["broken"]["ok"] and "error" in recorded["broken"]
    assert recorded["fine"]["ok"]


def test_a_hanging_candidate_is_stopped_and_the_next_one_runs_in_a_fresh_process(results):
    recorded, on_result = results
    tasks = [(name, "check", VARIANTS["interpret"]) for name in ("first", "second")]
    sweep.run_tasks(tasks, 1, True, 0.01, float("inf"), on_result)  # no check answers within 10 ms
    assert set(recorded) == {"first", "second"}
    assert all("no answer in" in rec["error"] for rec in recorded.values())


def _sweep_json(tmp_path, final: dict, ok: dict) -> Path:
    cands = sweep.candidates()
    data = {
        "candidates": {n: {"config": cands[n], "check": {"ok": ok.get(n, True)}} for n in final},
        "final": {n: {"idle_ms": ms, "busy_ms": ms * 0.98, "busy_runs": 50} for n, ms in final.items()},
    }
    path = tmp_path / "matmul_sweep.json"
    path.write_text(json.dumps(data))
    return path


def test_ship_makes_a_clear_winner_the_default_and_keeps_the_shipped_one_otherwise(tmp_path, monkeypatch):
    """A device call measures, ships and verifies in one go: the route's default changes only for a finalist that
    passed its checks and beats the shipped default from an idle GPU by the margin."""
    shipped = sweep.cfg_name(VARIANTS["default"])
    winner, wrong = [n for n in sweep.candidates() if n != shipped and "tma" not in n][:2]
    route = tmp_path / "matmul.py"
    original = (ROOT / "kernels" / "triton" / "matmul.py").read_text()

    route.write_text(original)
    assert sweep.ship(_sweep_json(tmp_path, {shipped: 1.40, winner: 1.39}, {}), route) == 0
    assert route.read_text() == original  # under the margin

    assert sweep.ship(_sweep_json(tmp_path, {shipped: 1.40, wrong: 1.00}, {wrong: False}), route) == 0
    assert route.read_text() == original  # fastest, but failed a check

    assert sweep.ship(_sweep_json(tmp_path, {shipped: 1.40, winner: 1.20, wrong: 1.30}, {}), route) == 0
    namespace: dict = {"__name__": "shipped_matmul"}
    monkeypatch.syspath_prepend(str(ROOT / "kernels" / "triton"))  # as the harness loads a route: launch.py beside it
    exec(compile(route.read_text(), str(route), "exec"), namespace)
    assert namespace["VARIANTS"]["default"] == sweep.candidates()[winner]
    assert route.read_text().count('"default":') == 1
