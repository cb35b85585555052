"""What confining a job costs: the batch script the scheduler submits (services/common/sandbox.py job_batch_script)
run as the job user on a `true` script, against `bash` running the same script as that user, without Slurm (whose own
start-up is in slurm_latency.py). Run as root; prints JSON.

    PYTHONPATH=.:protos .venv/bin/python bench/scheduler/job_sandbox.py --runs 20
"""

import argparse
import json
import os
import pwd
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from services.common.sandbox import INNER_ROOT, job_batch_script


def timings(command: list[str], runs: int, cwd: Path) -> dict:
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, check=True, cwd=cwd, stdout=subprocess.DEVNULL)
        seconds.append(time.perf_counter() - started)
    seconds.sort()
    return {
        "median_ms": round(statistics.median(seconds) * 1000, 1),
        "p95_ms": round(seconds[int(0.95 * (len(seconds) - 1))] * 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--user", default=os.environ.get("KB_JOB_USER", "kb-job"))
    args = parser.parse_args()
    user = pwd.getpwnam(args.user)
    box = Path(tempfile.mkdtemp(prefix="kb-bench-job-", dir="/var/tmp"))
    try:
        box.chmod(0o711)
        work = box / "work"
        work.mkdir()
        (work / "true.sh").write_text("#!/bin/bash\ntrue\n")
        os.chown(work, user.pw_uid, user.pw_gid)
        batch = box / "batch.sh"
        batch.write_text(
            job_batch_script(
                box=box,
                workdir=".",
                command=["/bin/bash", f"{INNER_ROOT}/work/true.sh"],
                hidden=[],
                network=False,
                cpu_seconds=60,
                label="bench",
            )  # fmt: skip
        )
        batch.chmod(0o644)
        as_user = ["runuser", "-u", args.user, "--"]
        result = {
            "runs": args.runs,
            "bare": timings([*as_user, "bash", str(work / "true.sh")], args.runs, work),
            "confined": timings([*as_user, "bash", str(batch)], args.runs, work),
        }
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(box, ignore_errors=True)


if __name__ == "__main__":
    main()
