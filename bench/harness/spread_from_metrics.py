"""The spread's trace (docs/decisions/0006), read off the
metrics files the runs recorded: per verified check, its score, the calibration's empty call's host part (measured
before route code was imported), the route's host part inside the events over the 12 problems, and on how many
problems that host part was above its median over the checks (a state of the process shows as most or few); then how
the score goes with each.

usage: python3 bench/harness/spread_from_metrics.py [--subset] [bench/harness/isolation/run*/svc/*.json ...]
       (--subset: passing checks of the same problems, verified or not, e.g. an 80 GB card's --only checks)
       python3 bench/harness/spread_from_metrics.py --spread-of LABEL FILE...   (one line: the spread of some checks)
       python3 bench/harness/spread_from_metrics.py --within-runs   (each run's passing full checks of the route: the
       spread inside one device call, and how many checks an average would need for two of them to agree within 1 %)
"""

import glob
import json
import math
import statistics
import sys
from pathlib import Path

HOST_PARTS = ("record_start", "call", "record_end")  # what of a timed call's split is inside the events


def host_ms(split: dict | None) -> float:
    return sum((split or {}).get(part, 0.0) for part in HOST_PARTS)


def spread_percent(values: list[float]) -> float:
    middle = statistics.median(values) if values else 0
    return 100 * (max(values) - min(values)) / middle if len(values) > 1 and middle else float("nan")


def spread_of(label: str, paths: list[str]) -> str:
    """One line on a set of checks (bench/harness/layout_gpu.sh, pinned_gpu.sh): how far their scores and the
    candidate's host part inside the events, summed over the problems, spread."""
    docs = [json.loads(Path(p).read_text()) for p in paths if Path(p).is_file()]  # an unmatched glob stays a word
    docs = [d for d in docs if d.get("passed")]
    if len(docs) < 2:
        return f"{label}: {len(docs)} passing checks, too few"
    scores = [d["score"] for d in docs]
    hosts = [sum(host_ms(d["details"][s["id"]].get("candidate_split_ms")) for s in d["subtasks"]) for d in docs]
    verified = sum(bool(d.get("verified")) for d in docs)
    return (
        f"{label}: {len(docs)} passing checks (verified: {verified}), scores {min(scores):.4g}-{max(scores):.4g} "
        f"(spread {spread_percent(scores):.1f} %), candidate host part inside the events summed over the problems "
        f"{min(hosts):.3f}-{max(hosts):.3f} ms (spread {spread_percent(hosts):.1f} %)"
    )


def within_runs(here: Path) -> None:
    """Per device call (runN/), the route's passing checks of one problem set (no peers, no probes): their spread,
    and, from the pooled relative standard deviation s of one check inside a call, how many checks k an average
    would need for two such averages to agree within 1 % 95 times in 100 (normal errors: 1.96 * sqrt(2) * s /
    sqrt(k) <= 1 %; a median of k needs about 1.25^2 times as many)."""
    runs: dict[str, list[float]] = {}
    for path in sorted(here.glob("run*/**/*.json")):
        if {"peers", "probe"} & set(path.parts):
            continue
        doc = json.loads(path.read_text())
        if isinstance(doc, dict) and doc.get("passed") and len(doc.get("subtasks", ())) >= 11:
            runs.setdefault(path.relative_to(here).parts[0], []).append(doc["score"])
    print("| run | checks | scores | spread | relative sd |")
    print("|---|---|---|---|---|")
    pooled = []
    for run, scores in sorted(runs.items(), key=lambda item: int(item[0][3:])):
        if len(scores) < 2:
            continue
        mean = statistics.mean(scores)
        sd = statistics.stdev(scores) / mean
        pooled += [score / mean - 1 for score in scores]
        print(
            f"| {run} | {len(scores)} | {min(scores):.3f}-{max(scores):.3f} | {spread_percent(scores):.1f} % "
            f"| {100 * sd:.2f} % |"
        )
    s = statistics.stdev(pooled) if len(pooled) > 1 else float("nan")
    k = math.ceil((1.96 * math.sqrt(2) * s / 0.01) ** 2) if s == s else 0
    within = statistics.NormalDist(0, math.sqrt(2) * s).cdf(0.01) * 2 - 1 if s == s else float("nan")
    print(
        f"pooled relative sd of one check inside a call: {100 * s:.2f} % ({len(pooled)} checks); two single checks "
        f"agree within 1 % about {100 * within:.0f} times in 100; two averages of {k} checks each would agree "
        f"within 1 % 95 times in 100"
    )


def main() -> None:
    if sys.argv[1:2] == ["--spread-of"]:
        print(spread_of(sys.argv[2], sys.argv[3:]))
        return
    if sys.argv[1:2] == ["--within-runs"]:
        within_runs(Path(__file__).resolve().parent / "isolation")
        return
    subset = sys.argv[1:2] == ["--subset"]
    args = sys.argv[2:] if subset else sys.argv[1:]
    here = Path(__file__).resolve().parent / "isolation"
    paths = args or sorted(glob.glob(str(here / "run*" / "svc" / "*.json")))
    rows = []
    for path in paths:
        doc = json.loads(Path(path).read_text())
        if not doc.get("passed" if subset else "verified"):
            continue
        empty = host_ms(doc["isolation"]["candidate"].get("idle_split_ms"))
        per_problem = {
            sub["id"]: host_ms(doc["details"][sub["id"]].get("candidate_split_ms")) for sub in doc["subtasks"]
        }
        where = Path(path).resolve()
        run = where.parent.parent if where.parent.name == "svc" else where.parent
        rows.append((doc["score"], f"{run.name} {where.stem}", empty, per_problem))
    if len(rows) < 2 or len({frozenset(row[3]) for row in rows}) > 1:
        sys.exit(f"{len(rows)} {'passing' if subset else 'verified'} checks of one problem set: too few to compare")
    medians = {pid: statistics.median(row[3][pid] for row in rows) for pid in rows[0][3]}
    print(
        f"| check | score | empty call's host part, µs | route's host part, {len(medians)} problems, ms "
        "| problems above median |"
    )
    print("|---|---|---|---|---|")
    for score, name, empty, per_problem in sorted(rows, reverse=True):
        above = sum(per_problem[pid] > medians[pid] for pid in medians)
        route = sum(per_problem.values())
        print(f"| {name} | {score:.3f} | {empty * 1e3:.1f} | {route:.2f} | {above} of {len(medians)} |")
    scores = [r[0] for r in rows]
    route = statistics.correlation([sum(r[3].values()) for r in rows], scores)
    empty = statistics.correlation([r[2] for r in rows], scores)
    print(f"correlation with the score: route's host part {route:.2f}, empty call's {empty:.2f} ({len(rows)} checks)")


if __name__ == "__main__":
    main()
