"""`kb job` and slurm.sh (sbatch, squeue, sacct, scancel) from a clone, against the real scheduler and Slurm."""

import asyncio
import json
import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slurm, pytest.mark.timeout(300)]


async def shell(stack, who: str, script: str, tmp_path) -> tuple[int, str]:
    """Run bash in the route's clone as `who`, with `kb` on PATH running this checkout."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "kb").write_text(f'#!/bin/sh\nexec {sys.executable} -m services.cli.main "$@"\n')
    (bin_dir / "kb").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "PYTHONPATH": f"{ROOT}:{ROOT / 'protos'}",
        "KB_TOKEN": stack.tokens[who],
        "KB_SCHEDULER_ADDR": f"127.0.0.1:{stack.process.port}",
        "KB_INGEST_ADDR": stack.process.env["KB_INGEST_ADDR"],
    }
    # Not subprocess.run: ingest serves from this test's event loop, which must keep running meanwhile.
    process = await asyncio.create_subprocess_exec(
        "bash",
        "-c",
        script,
        cwd=stack.clones["fast"],
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), 120)
    return process.returncode, output.decode()


async def test_slurm_sh_and_kb_job_from_a_clone(stack, tmp_path):
    await stack.push_script("alice", "fast", "cli.sbatch", "#!/bin/bash\necho via-cli > cli.txt\n")
    await stack.push_script("alice", "fast", "cli-long.sbatch", "#!/bin/bash\nsleep 300\n")
    source = f"source {ROOT}/services/scheduler/slurm.sh"

    code, out = await shell(
        stack,
        "alice",
        f"{source}\nsbatch --parsable routes/fast/cli.sbatch\nsbatch --parsable routes/fast/cli-long.sbatch\nsqueue",
        tmp_path,
    )
    assert code == 0, out
    short_id, long_id = out.split()[:2]
    assert long_id in out.split("\n", 2)[2]  # squeue lists the live job

    code, out = await shell(stack, "alice", f"kb job show {long_id} --json", tmp_path)
    live = json.loads(out)
    assert code == 0 and not live["finished"] and live["exit_code"] is None, out  # not ended: no exit status yet
    code, out = await shell(stack, "alice", f"kb job show {long_id}", tmp_path)
    assert code == 0 and "exit code" not in out and "{" not in out, out

    code, out = await shell(stack, "alice", f"{source}\nscancel {long_id}", tmp_path)
    assert code == 0 and f"job {long_id}: cancel requested" in out, out
    await stack.wait_job(short_id, lambda job: job.finished and job.result_sha, 60, "finished")
    await stack.wait_job(long_id, lambda job: job.finished and job.result_sha, 60, "cancelled")

    code, out = await shell(stack, "alice", f"{source}\nsacct -j {short_id},{long_id}", tmp_path)
    lines = out.splitlines()
    assert code == 0 and lines[0] == "JobID|State|ExitCode|Elapsed|CPUSeconds", out
    assert lines[1].startswith(f"{short_id}|COMPLETED|0:0|") and lines[2].startswith(f"{long_id}|CANCELLED|"), out

    code, out = await shell(
        stack, "alice", f"kb job fetch {short_id} && git show refs/jobs/{short_id}:routes/fast/cli.txt", tmp_path
    )
    assert code == 0 and out.splitlines()[-1] == "via-cli", out

    code, out = await shell(stack, "alice", f"kb job show {short_id} --json", tmp_path)
    assert code == 0 and '"state": "COMPLETED"' in out, out
    code, out = await shell(stack, "alice", f"kb job show {short_id}", tmp_path)
    fields = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in out.splitlines() if line.strip())
    assert code == 0 and fields["state"] == "COMPLETED" and fields["exit code"] == "0", out
    assert fields["resources"].startswith("partition ") and " 1 CPU, " in fields["resources"], out
    assert fields["result"].endswith(f"at refs/jobs/{short_id} (kb job fetch {short_id})"), out

    code, out = await shell(stack, "alice", f"{source}\nsbatch --time=5 routes/fast/cli.sbatch", tmp_path)
    assert code == 2 and "#SBATCH" in out, out
    code, out = await shell(stack, "mallory", f"kb job release {short_id}", tmp_path)
    assert code == 1 and "PERMISSION_DENIED" in out and "maintainer" in out, out


async def test_an_orphaned_slurm_job_is_cancelled_when_the_scheduler_starts(stack, slurm_conf, tmp_path):
    """sbatch ran but the scheduler died before recording the job: nobody would follow it, so it must not run."""
    from services.common.slurm import Slurm
    from services.scheduler.jobs import SchedulerConfig

    slurm = Slurm(slurm_conf)
    (tmp_path / "orphan.sh").write_text("#!/bin/bash\nsleep 300\n")
    name = f"kb-{SchedulerConfig(home=stack.home).deployment}-999999"
    orphan = await slurm.submit(str(tmp_path / "orphan.sh"), str(tmp_path), job_name=name, hold=True)
    stack.process.stop()
    await stack.process.start()
    for _ in range(60):
        record = (await slurm.accounting([orphan])).get(orphan)
        if record and record.state == "CANCELLED":
            break
        await asyncio.sleep(0.5)
    assert record and record.state == "CANCELLED", record
