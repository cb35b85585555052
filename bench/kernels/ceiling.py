"""The highest score a route could get under the verifier's timing, from verified checks' metrics files (issue 18)
or from the kernel bench's JSON (issue 39).

Each problem's best time is its bandwidth or compute floor (the check's ``floor_fraction`` times its candidate time)
plus the host part that lies inside the events of a call.

- ``--version 1`` (the default): each call is timed from an idle GPU with its launch inside the events; the host
  part is the time from the start event to the kernel's start, which every route pays (an empty call's, measured by
  the judge's calibration before route code was imported, is its least). The reference's time is the one the check
  measured, its own host part inside. Printed: the check's score, the ceiling at several host parts, and the host
  part at which the ceiling falls to the target.
- ``--version 2``: the events time the GPU alone (BENCHMARK.md, verifier version 2), so the host part is 0 by the
  rule and the reference's time is its device time. Printed: the check's score, the ceiling, the score's share of it
  and the problem furthest below its floor.
- ``--bench H200.json`` (bench/kernels/run.py's output): the same version 2 ceiling from the bench's back-to-back
  times, which hold no host part either (the host's launch overlaps the previous run's L2 flush): eager's time as the
  reference, the problem's floor (BENCHMARK.md), the route's time; one row per problem and the geometric means.

usage: python3 bench/kernels/ceiling.py METRICS.json ... [--version 1|2] [--target 4.2] [--out ceiling.md]
       python3 bench/kernels/ceiling.py --bench kernels/results/h200.json [--target 4.3] [--out ceiling_v2.md]
           [--card-floors] [--ours PROBLEM=VARIANT ...]
  --card-floors: the memory-bound floors at the run's own copy bandwidth (a run on another card than the H200);
  --ours: a variant's time counts as the route's (one shipped after the run).
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


def check_problems(doc: dict) -> list[tuple[str, float, float]]:
    """(id, reference ms, floor ms) of each passed subtask of a check's metrics that carries its floor."""
    return [
        (s["id"], s["reference_ms"], s["candidate_ms"] * s["floor_fraction"])
        for s in doc["subtasks"]
        if s.get("passed") and s.get("floor_fraction")
    ]


def report(path: Path, target: float) -> list[str]:
    doc = json.loads(path.read_text())
    problems = check_problems(doc)
    calibration = (doc.get("isolation") or {}).get("candidate") or {}
    empty_call = (calibration.get("idle_split_ms") or {}).get("call", 0.0)
    cells = " | ".join(f"{ceiling(problems, h):.3f}" for h in HOST_PARTS_MS)
    return [
        f"| {'/'.join(path.parts[-3:])} | {len(problems)} | {doc.get('score', 0):.3f} | {cells} | "
        f"{host_part_for(problems, target):.4f} | {empty_call:.4f} |"
    ]


def report_v2(path: Path) -> list[str]:
    """A version 2 check: no host part, so one ceiling; the problem furthest below its floor beside it."""
    doc = json.loads(path.read_text())
    problems = check_problems(doc)
    top = ceiling(problems, 0.0)
    score = doc.get("score", 0.0)
    worst = min(doc["subtasks"], key=lambda s: s.get("floor_fraction") or 1.0)
    return [
        f"| {'/'.join(path.parts[-3:])} | {len(problems)} | {score:.3f} | {top:.3f} | {100 * score / top:.1f} % | "
        f"{worst['id']} {100 * (worst.get('floor_fraction') or 0):.0f} % |"
    ]


COMPUTE_BOUND = {"matmul"}  # its floor is a rate of arithmetic, not of bytes: the card's copy bandwidth leaves it


def bench_rows(doc: dict, card_floors: bool = False, ours: dict | None = None) -> list[dict]:
    """Per problem of a bench JSON (bench/kernels/run.py): eager, floor and ours in ms, back to back. card_floors:
    each memory-bound floor from the run's own copy bandwidth (another card than BENCHMARK.md's H200); ours: problem
    -> the variant whose time counts as ours (one shipped after the run)."""
    copy = doc["environment"]["copy_tb_s"] * 1e9  # bytes per ms
    rows = []
    for pid, r in doc["problems"].items():
        floor = r["floor_bytes"] / copy if card_floors and pid not in COMPUTE_BOUND else r["floor_ms"]
        variant = (ours or {}).get(pid)
        mine = r["variant_ms"][variant] if variant else r["ours_ms"]
        rows.append({"id": pid, "eager": r["eager_ms"], "floor": floor, "ours": mine})
    return rows


def report_bench(path: Path, target: float, card_floors: bool = False, ours: dict | None = None) -> list[str]:
    rows = bench_rows(json.loads(path.read_text()), card_floors, ours)
    lines = [
        "| problem | eager ms | floor ms | ours ms | of floor | ceiling (eager / floor) | ours (eager / ours) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['id']} | {r['eager']:.3f} | {r['floor']:.3f} | {r['ours']:.3f} | "
            f"{100 * r['floor'] / r['ours']:.0f} % | {r['eager'] / r['floor']:.2f}× | {r['eager'] / r['ours']:.2f}× |"
        )
    top = geometric_mean([r["eager"] / r["floor"] for r in rows])
    ours = geometric_mean([r["eager"] / r["ours"] for r in rows])
    lines += [
        "",
        f"Over {len(rows)} problems, version 2's timing (no host part): ceiling **{top:.3f}**, this route "
        f"**{ours:.3f}** ({100 * ours / top:.1f} % of the ceiling); target {target:g}.",
    ]
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("metrics", nargs="*", type=Path)
    parser.add_argument("--version", type=int, choices=(1, 2), default=1)
    parser.add_argument("--bench", type=Path, help="a bench/kernels/run.py JSON: the version 2 ceiling per problem")
    parser.add_argument("--card-floors", action="store_true", help="--bench: floors at the run's copy bandwidth")
    parser.add_argument(
        "--ours", nargs="*", default=[], metavar="PROBLEM=VARIANT", help="--bench: a variant's time as ours"
    )
    parser.add_argument("--target", type=float, default=4.2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.bench:
        ours = dict(item.split("=", 1) for item in args.ours)
        lines = report_bench(args.bench, args.target, args.card_floors, ours)
    elif not args.metrics:
        parser.error("give METRICS.json files or --bench")
    elif args.version == 2:
        lines = [
            "| check | problems | score | ceiling (no host part) | score / ceiling | furthest below its floor |",
            "|---|---|---|---|---|---|",
        ]
        for path in args.metrics:
            lines += report_v2(path)
    else:
        lines = v1_lines(args)
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out:
        args.out.write_text(text)
    return 0


def v1_lines(args) -> list[str]:
    heads = " | ".join(f"ceiling at {h:g} ms" for h in HOST_PARTS_MS)
    lines = [
        f"| check | problems | score | {heads} | host part (ms) at which the ceiling is {args.target:g} | "
        "an empty call's host time between the events (ms), the least any call pays |",
        "|---|---|---|" + "---|" * len(HOST_PARTS_MS) + "---|---|",
    ]
    for path in args.metrics:
        lines += report(path, args.target)
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
