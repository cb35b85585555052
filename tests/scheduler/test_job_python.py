"""A job runs with the benchmark's tools: the Python the checks use, with its torch and triton, on the real Slurm, as
the job user, confined (issue 37: a job's script found no torch)."""

import os
import sys

import pytest
import torch
import triton

from services.common import sandbox
from tests.support.scheduler import settled, show

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


@pytest.mark.slurm
@pytest.mark.timeout(300)
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


def test_the_batch_script_puts_the_checks_python_first_and_binds_back_only_its_install(tmp_path):
    python = sandbox.job_python(sys.executable)
    assert {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)} == set(python.prefixes)
    script = sandbox.job_batch_script(
        box=tmp_path,
        workdir=".",
        command=["/bin/true"],
        hidden=[],
        network=False,
        cpu_seconds=60,
        label="t",
        python=python,
    )
    assert f"PATH={python.bin_dir}:{sandbox.JOB_PATH}" in script and f"KB_PYTHON={sys.executable}" in script
    assert " /root " in script  # covered, with the interpreter's install under it bound back
    for prefix in python.prefixes:
        if prefix.startswith("/root/"):
            assert f" +{prefix} " in script


def test_a_python_for_jobs_that_does_not_run_is_refused_by_name():
    with pytest.raises(ValueError, match="/nonexistent/python, does not run here"):
        sandbox.job_python("/nonexistent/python")
