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
