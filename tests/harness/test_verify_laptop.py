"""`kb verify` on a machine without a GPU behaves as the service's CPU checks do (issue 37): Triton kernels run in
its interpreter without the caller setting TRITON_INTERPRET, and the metrics land outside the clone by default."""

import json
import os
import subprocess
import sys

from .conftest import REPO, ROUTES


def test_kb_verify_without_triton_interpret_runs_a_triton_route_as_the_service_does(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(PYTHONPATH=f"{REPO}:{REPO / 'protos'}", XDG_CACHE_HOME=str(tmp_path / "cache"))
    done = subprocess.run(
        [sys.executable, "-m", "services.cli.main", "verify", str(ROUTES / "honest"), "--shapes", "smoke"]
        + ["--only", "new_gelu", "--rules", str(REPO / "scienceslack.json")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no GPU: TRITON_INTERPRET=1, as the service's CPU checks run" in done.stderr
    metrics = tmp_path / "cache" / "kernelboard" / "verify" / "honest.json"
    assert json.loads(metrics.read_text())["passed"] is True
    assert list(tmp_path.iterdir()) == [tmp_path / "cache"]  # nothing written where it ran
    # the summary words the check as kb checks and the web board do (contracts/results.py)
    assert "result  passed, unverified (CPU profile)\n" in done.stdout and "score   —\n" in done.stdout
    assert f"metrics {metrics}" in done.stdout


PLAIN_HUBER = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, predictions, targets):
        diff = (predictions - targets).abs()
        return torch.where(diff < 1.0, 0.5 * diff * diff, diff - 0.5).mean()
"""
PLAIN_HINGE = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, predictions, targets):
        return torch.relu(1 - predictions * targets).mean()
"""


def test_one_check_reports_every_broken_guardrail_of_every_problem_and_says_what_is_allowed(tmp_path, capsys):
    """Correct plain PyTorch with ops the reference does not call is class 9 (issue 37's huber_loss); the refusal
    names the reference's own ops and what is allowed, and every problem's violations come in one check."""
    from services.cli.main import main as kb_main

    route = tmp_path / "route"
    route.mkdir()
    (route / "huber_loss.py").write_text(PLAIN_HUBER)
    (route / "hinge_loss.py").write_text(PLAIN_HINGE)
    (route / "new_gelu.py").write_text((ROUTES.parent / "cheats" / "c03_input_mutation" / "new_gelu.py").read_text())
    metrics = tmp_path / "metrics.json"
    args = [str(route), "--metrics", str(metrics), "--shapes", "smoke", "--device", "cpu"]
    assert kb_main(["verify", *args, "--rules", str(REPO / "scienceslack.json")]) == 1
    reasons = json.loads(metrics.read_text())["reasons"]
    assert {r.split(":")[0] for r in reasons} == {"huber_loss", "hinge_loss", "new_gelu"}, reasons
    [huber] = [r for r in reasons if r.startswith("huber_loss: class 9")]
    assert "the reference does not: aten::abs" in huber and "aten::where" in huber
    assert "Allowed: the reference's own ops (aten::smooth_l1_loss)" in huber
    assert "your own kernels (Triton); plain PyTorch with other ops is not" in huber
    assert any(r.startswith("hinge_loss: class 9") and "aten::relu" in r for r in reasons)
    assert any(r.startswith("new_gelu: class 3 (input mutation)") for r in reasons)
    shown = capsys.readouterr().out
    assert all(f"reason: {r}" in shown for r in reasons) and "result  failed\n" in shown
