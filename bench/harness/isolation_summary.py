"""Summarises bench/harness/isolation_gpu.sh's files: the scores, wall times and per-problem speed-ups of the check
before the split, directly after it, and the service's way (twice), where each run's time went, then every cheat and
attack.

usage: python3 bench/harness/isolation_summary.py OUT_DIR
"""

import json
import sys
from pathlib import Path


def load(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def print_phases(name: str, doc: dict) -> None:
    """Where the check's wall time went (the metrics file's ``phases``, seconds since the judge process started), and
    each problem's steps."""
    phases = doc.get("phases")
    if not phases:
        return
    reference = phases["reference_phase"]
    print(
        f"\n{name}: the judge began its check at {phases['check_started']} s, timed the references from "
        f"{reference[0]} to {reference[1]} s and ended at {phases['check_ended']} s"
    )
    for k, cand in enumerate(phases["candidates"]):
        print(
            f"  candidate {k + 1}: spawned {cand['spawned']} s, torch loaded {cand['waiting']} s, go {cand['go']} s, "
            f"ready {cand['ready']} s"
        )
    print("\n| problem | start s | wall s | " + " | ".join(STEPS) + " | judge copies s |")
    print("|---|---|---|" + "---|" * (len(STEPS) + 1))
    for pid, (start, end) in phases["problems"].items():
        details = (doc.get("details") or {}).get(pid) or {}
        steps = details.get("step_s") or {}
        cells = [str(steps.get(step, "")) for step in STEPS]
        print(
            f"| {pid} | {start} | {round(end - start, 3)} | "
            + " | ".join(cells)
            + f" | {details.get('output_copy_s', '')} |"
        )


STEPS = ("candidate", "load", "correctness", "kernels", "timing")


def main(out: Path) -> None:
    runs = {name: load(out / f"{name}.json") for name in ("before", "direct", "service_1", "service_2")}
    runs = {name: doc for name, doc in runs.items() if doc and "subtasks" in doc}
    print("| run | passed | verified | score | harness wall s | candidate | round trip ms | copy GB/s |")
    print("|---|---|---|---|---|---|---|---|")
    for name, doc in runs.items():
        cand = (doc.get("isolation") or {}).get("candidate") or {}
        who = f"{cand.get('user')} bwrap={cand.get('bubblewrap')} cgroup={cand.get('cgroup')}" if cand else "in-process"
        trip, copy = cand.get("round_trip_ms"), cand.get("copy_gb_per_s")
        print(
            f"| {name} | {doc['passed']} | {doc.get('verified')} | {doc['score']:.4f} | {doc.get('wall_s', 0):.1f} | "
            f"{who} | {trip if trip is None else round(trip, 3)} | {copy if copy is None else round(copy, 2)} |"
        )
        for note in cand.get("notes") or []:
            print(f"  note ({name}): {note}")
        for reason in doc.get("reasons") or []:
            print(f"  broken ({name}): {reason[:300]}")
    if runs:
        names = list(runs)
        print("\n| problem | " + " | ".join(f"speed-up {n}" for n in names) + " |")
        print("|---|" + "---|" * len(names))
        first = next(iter(runs.values()))
        for k, sub in enumerate(first["subtasks"]):
            cells = [f"{doc['subtasks'][k]['speedup']:.3f}" for doc in runs.values()]
            print(f"| {sub['id']} | " + " | ".join(cells) + " |")
    for name, doc in runs.items():
        print_phases(name, doc)
    cheats = load(out / "cheats.json") or {}
    if cheats:
        print("\n| cheat or attack (static pass skipped) | passed | first reason |")
        print("|---|---|---|")
        for name, doc in cheats.items():
            reason = (doc.get("reasons") or [""])[0].replace("|", "/")[:200]
            print(f"| {name} | {doc['passed']} | {reason} |")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
