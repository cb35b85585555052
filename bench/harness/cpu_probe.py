"""Why short problems' speed-ups move from check to check (issue 13, item 7: within 1 %): is it the CPU a candidate
lands on? The recorded checks show the candidate's host work inside the events (the start event's record, the call's
launches, the end event's record) varying up to 2x from one check to the next, mostly slow or quick on every problem
of a check, and the score following it (bench/harness/isolation/runs.md, "The spread and the candidate's host
speed"; bench/harness/spread_from_metrics.py; its answer: docs/decisions/0006). This probe pins itself to each CPU in
turn and times what a timed call's host side does -- an empty call through GpuKit.time_one and a small kernel launch
through torch's dispatcher -- then does the sweep again a few times over a minute: a CPU that is slow in every sweep
points at placement (and a fix: the candidate pinned to a fast CPU), every CPU slow in one sweep at time (the host's
other tenants), which pinning cannot fix. Beside each launch it times plain Python (no device call): slow together
means the CPU is slow at that moment, a launch slow alone the path to the GPU.

usage: python3 bench/harness/cpu_probe.py OUT.json [--sweeps 5] [--pause 10] [--calls 200]
"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from services.verifier.harness.device import CpuKit, GpuKit  # noqa: E402


def host_split(kit, run, calls: int) -> dict:
    """Medians over ``calls`` of time_one's host parts (ms)."""
    parts = []
    for _ in range(calls):
        kit.time_one(run)
        parts.append(kit.last_split)
    start, call, end, sync = (statistics.median(p[i] for p in parts) for i in range(4))
    return {"record_start": start, "call": call, "record_end": end, "sync": sync, "host": start + call + end}


def python_ms(calls: int) -> float:
    """Median ms of a fixed piece of plain Python, no device call in it: if this is slow when a launch is, the CPU
    itself is slow at that moment (its clock, a busy sibling on the host), not the path to the GPU."""
    took = []
    for _ in range(calls):
        t0 = time.perf_counter()
        sum(range(300))
        took.append(time.perf_counter() - t0)
    return statistics.median(took) * 1e3


def sweep(kit, cpus: list[int], calls: int, device: torch.device) -> dict:
    small = torch.zeros(1024, device=device)
    found = {}
    for cpu in cpus:
        os.sched_setaffinity(0, {cpu})
        host_split(kit, lambda: None, 20)  # settle on the new CPU
        found[cpu] = {
            "empty": host_split(kit, lambda: None, calls),
            "launch": host_split(kit, lambda: small.add_(1.0), calls),
            "python": python_ms(calls),
        }
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--sweeps", type=int, default=5)
    parser.add_argument("--pause", type=float, default=10.0)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    kit = GpuKit(device, l2_flush=False) if device.type == "cuda" else CpuKit(device)
    cpus = sorted(os.sched_getaffinity(0))
    siblings = {}
    for cpu in cpus:
        path = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
        siblings[cpu] = path.read_text().strip() if path.exists() else None
    result = {"device": device.type, "cpus": cpus, "siblings": siblings, "sweeps": []}
    for index in range(args.sweeps):
        if index:
            time.sleep(args.pause)
        result["sweeps"].append({"at_s": time.time(), "per_cpu": sweep(kit, cpus, args.calls, device)})
    os.sched_setaffinity(0, set(cpus))
    Path(args.out).write_text(json.dumps(result, indent=1))
    print("host us of a small launch (start record + call + end record) / of plain Python, per CPU and sweep:")
    for cpu in cpus:
        row = " ".join(
            f"{s['per_cpu'][cpu]['launch']['host'] * 1e3:.1f}/{s['per_cpu'][cpu]['python'] * 1e3:.1f}"
            for s in result["sweeps"]
        )
        print(f"cpu {cpu:>3} (siblings {siblings[cpu]}): {row}")


if __name__ == "__main__":
    main()
