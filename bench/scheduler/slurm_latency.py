"""How long the scheduler's Slurm calls take on the local cluster: sbatch, sbatch + admin hold, one batched sacct
for many jobs against one per job, and sbatch until sacct reports the end.

    SLURM_CONF=... python bench/scheduler/slurm_latency.py [--jobs 20] > bench/scheduler/results.json
"""

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from services.common.slurm import Slurm


def summary(samples: list[float]) -> dict:
    ordered = sorted(samples)
    return {
        "n": len(ordered),
        "median_ms": round(statistics.median(ordered) * 1000, 1),
        "p95_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))] * 1000, 1),
        "max_ms": round(ordered[-1] * 1000, 1),
    }


async def timed(call) -> tuple[float, object]:
    started = time.perf_counter()
    result = await call
    return time.perf_counter() - started, result


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=20)
    args = parser.parse_args()
    slurm = Slurm(os.environ["SLURM_CONF"])
    with tempfile.TemporaryDirectory() as work:
        script = Path(work) / "true.sh"
        script.write_text("#!/bin/bash\ntrue\n")
        sbatch, held_sbatch, to_end, ids = [], [], [], []
        for _ in range(args.jobs):
            seconds, job_id = await timed(slurm.submit(str(script), work, job_name="kb-bench", hold=False))
            sbatch.append(seconds)
            ids.append(job_id)
            started = time.perf_counter() - seconds
            while True:  # sbatch until accounting says it ended (poll every 100 ms)
                record = (await slurm.accounting([job_id])).get(job_id)
                if record and record.state == "COMPLETED":
                    to_end.append(time.perf_counter() - started)
                    break
                await asyncio.sleep(0.1)
        for _ in range(args.jobs):
            seconds, job_id = await timed(slurm.submit(str(script), work, job_name="kb-bench", hold=True))
            held_sbatch.append(seconds)
            await slurm.cancel(job_id)
        batched = [(await timed(slurm.accounting(ids)))[0] for _ in range(10)]
        one_by_one = [sum([(await timed(slurm.accounting([i])))[0] for i in ids]) for _ in range(3)]
        squeue = [(await timed(slurm.queue()))[0] for _ in range(10)]
    print(
        json.dumps(
            {
                "machine": f"{os.cpu_count()} CPUs, Slurm 22.05 single node (deploy/local/slurm)",
                "sbatch": summary(sbatch),
                "sbatch_then_admin_hold": summary(held_sbatch),
                "sbatch_to_completed_in_sacct": summary(to_end),
                f"sacct_one_call_for_{len(ids)}_jobs": summary(batched),
                f"sacct_{len(ids)}_calls_one_job_each": summary(one_by_one),
                "squeue": summary(squeue),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
