"""The highest score a route could get under the verifier's timing, from verified checks' metrics files (issue 18).

Each problem's best time is its bandwidth or compute floor (the check's ``floor_fraction`` times its candidate time)
plus the host part that lies inside the events of a call timed from an idle GPU: the time from the start event to
the kernel's start, which every route pays (an empty call's, measured by the judge's calibration before route code
was imported, is its least). The reference's time is the one the check measured, its own host part inside. Printed:
the check's score, the ceiling at several host parts, and the host part at which the ceiling falls to the target.

usage: python3 bench/kernels/ceiling.py METRICS.json ... [--target 4.2] [--out ceiling.md]
"""

import argparse
import json
import math
from pathlib import Path

HOST_PARTS_MS = (0.0, 0.01, 0.02, 0.03, 0.05, 0.08)


def geometric_mean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def ceiling(problems: list[tuple[str, float, float]], host_ms: float) -> float:
    """problems: (id, reference ms, floor ms)."""
    return geometric_mean([reference / (floor + host_ms) for _, reference, floor in problems])


def host_part_for(problems, target: float) -> float:
    """The host part (ms) at which the ceiling equals ``target``; negative where even none reaches it."""
    if ceiling(problems, 0.0) < target:
        return -1.0
    low, high = 0.0, 1.0
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if ceiling(problems, middle) >= target else (low, middle)
    return low


def report(path: Path, target: float) -> list[str]:
    doc = json.loads(path.read_text())
    problems = [
        (s["id"], s["reference_ms"], s["candidate_ms"] * s["floor_fraction"])
        for s in doc["subtasks"]
        if s.get("passed") and s.get("floor_fraction")
    ]
    calibration = (doc.get("isolation") or {}).get("candidate") or {}
    empty_call = (calibration.get("idle_split_ms") or {}).get("call", 0.0)
    cells = " | ".join(f"{ceiling(problems, h):.3f}" for h in HOST_PARTS_MS)
    return [
        f"| {'/'.join(path.parts[-3:])} | {len(problems)} | {doc.get('score', 0):.3f} | {cells} | "
        f"{host_part_for(problems, target):.4f} | {empty_call:.4f} |"
    ]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("metrics", nargs="+", type=Path)
    parser.add_argument("--target", type=float, default=4.2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    heads = " | ".join(f"ceiling at {h:g} ms" for h in HOST_PARTS_MS)
    lines = [
        f"| check | problems | score | {heads} | host part (ms) at which the ceiling is {args.target:g} | "
        "an empty call's host time between the events (ms), the least any call pays |",
        "|---|---|---|" + "---|" * len(HOST_PARTS_MS) + "---|---|",
    ]
    for path in args.metrics:
        lines += report(path, args.target)
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
