"""bench/kernels/ceiling.py: the version 2 ceiling (no host part) from a bench JSON and from checks' metrics."""

import json
import math

from bench.kernels import ceiling


def _bench(tmp_path):
    doc = {
        "environment": {"copy_tb_s": 2.0},
        "problems": {
            "a": {"eager_ms": 4.0, "floor_ms": 1.0, "floor_bytes": 4e9, "ours_ms": 2.0, "variant_ms": {"v": 1.0}},
            "b": {"eager_ms": 9.0, "floor_ms": 1.0, "floor_bytes": 2e9, "ours_ms": 1.0},
        },
    }
    path = tmp_path / "h200.json"
    path.write_text(json.dumps(doc))
    return path


def test_bench_ceiling_is_the_geometric_mean_of_eager_over_floor(tmp_path):
    text = "\n".join(ceiling.report_bench(_bench(tmp_path), 4.3))
    assert f"ceiling **{math.sqrt(4 * 9):.3f}**" in text  # 6.000
    assert f"this route **{math.sqrt(2 * 9):.3f}**" in text  # 4.243
    assert "| a | 4.000 | 1.000 | 2.000 | 50 % | 4.00× | 2.00× |" in text


def test_v2_check_has_no_host_part(tmp_path):
    doc = {
        "score": 3.0,
        "subtasks": [
            {"id": "a", "passed": True, "reference_ms": 4.0, "candidate_ms": 2.0, "floor_fraction": 0.5},
            {"id": "b", "passed": True, "reference_ms": 9.0, "candidate_ms": 1.0, "floor_fraction": 1.0},
        ],
    }
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps(doc))
    (row,) = ceiling.report_v2(path)
    assert "| 2 | 3.000 | 6.000 | 50.0 % | a 50 % |" in row
    assert ceiling.main([str(path), "--version", "2"]) == 0


def test_bench_ceiling_on_another_card_and_with_a_variant_shipped_after_the_run(tmp_path):
    """--card-floors: 4e9 bytes at the run's 2 TB/s is 2 ms; --ours a=v: a's variant time (1 ms) counts as ours."""
    text = "\n".join(ceiling.report_bench(_bench(tmp_path), 4.3, card_floors=True, ours={"a": "v"}))
    assert "| a | 4.000 | 2.000 | 1.000 | 200 % | 2.00× | 4.00× |" in text
    assert f"ceiling **{math.sqrt(2 * 9):.3f}**" in text
