"""A job runs with the benchmark's tools: the Python the checks use, with its torch and triton, on the real Slurm, as
the job user, confined (issue 37: a job's script found no torch)."""

import sys

import pytest
import torch
import triton

from tests.support.scheduler import settled, show

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(300)]

SCRIPT = """#!/bin/bash
#SBATCH --time=2
#SBATCH --mem=2048
python - > tools.txt 2>&1 <<'PY'
import sys, torch, triton
print(sys.executable)
print(torch.__version__)
print(triton.__version__)
print(torch.ones(3).sum().item())
PY
python3 -c 'import torch' && echo python3 ok >> tools.txt
"$KB_PYTHON" -c 'import triton' && echo KB_PYTHON ok >> tools.txt
ls -A /root > root.txt
"""


async def test_a_job_imports_the_torch_and_triton_the_checks_use(stack):
    sha = await stack.push_script("alice", "fast", "tools.sbatch", SCRIPT)
    job = await stack.submit("alice", "fast", sha, "tools.sbatch")
    job = await stack.wait_job(job.job_id, settled, 120, "finished")
    tools = show(stack, job.result_sha, "routes/fast/tools.txt")
    assert (job.state, job.exit_code) == ("COMPLETED", 0), tools
    # The scheduler runs on the same interpreter as this test (and the verifier's checks: KB_VERIFIER_PYTHON).
    assert tools.splitlines() == [
        sys.executable,
        torch.__version__,
        triton.__version__,
        "3.0",
        "python3 ok",
        "KB_PYTHON ok",
    ]
    # Root's home is covered in the job: only the way to the Python installed under it (if any) is there.
    assert set(show(stack, job.result_sha, "routes/fast/root.txt").split()) <= {".pyenv"}
