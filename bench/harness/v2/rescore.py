"""A recorded version 2 run scored again under the harness's rule as it stands (gated.scored_ms), from every timed
call the metrics files keep (details.<problem>.calls_us: reported, the judge's clock, lateness, in µs): each check's
per-problem speed-up and the geometric mean over the problems every check judged, and the spread between checks.
A problem a check failed takes its reference median from the first check that has one (the judge's reference timing
runs before the candidate's, so a failure leaves it unset).

usage: python3 bench/harness/v2/rescore.py bench/harness/v2/run1/direct.json bench/harness/v2/run1/service_*.json
"""

import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "protos")]

from services.verifier.harness.device import Timing  # noqa: E402
from services.verifier.harness.gated import GatedCall, scored_ms  # noqa: E402


def speedups(doc: dict, references: dict) -> dict[str, float]:
    found = {}
    for sub in doc["subtasks"]:
        calls = doc["details"].get(sub["id"], {}).get("calls_us")
        reference = sub["reference_ms"] or references.get(sub["id"])
        if not calls or not reference:
            continue
        scored = [scored_ms(GatedCall(r / 1e3, j / 1e3, late / 1e3, 0.0, False), "gpu")[0] for r, j, late in calls]
        found[sub["id"]] = reference / Timing.median(scored)
    return found


def main(paths: list[str]) -> None:
    docs = {path: json.loads(Path(path).read_text()) for path in paths}
    references = {}
    for doc in docs.values():
        for sub in doc["subtasks"]:
            if sub["reference_ms"]:
                references.setdefault(sub["id"], sub["reference_ms"])
    checks = {path: speedups(doc, references) for path, doc in docs.items()}
    common = sorted(set.intersection(*(set(found) for found in checks.values())))
    means = {}
    for path, found in checks.items():
        means[path] = math.exp(sum(math.log(found[pid]) for pid in common) / len(common))
        print(f"{Path(path).name:16s} {len(common)}-problem geometric mean {means[path]:.4f}")
    print(f"spread between checks: {100 * (max(means.values()) / min(means.values()) - 1):.3f} %")
    for pid in common:
        values = [found[pid] for found in checks.values()]
        spread = 100 * (max(values) / min(values) - 1)
        print(f"  {pid:20s} {min(values):8.4f}-{max(values):8.4f}  spread {spread:.2f} %")


if __name__ == "__main__":
    main(sys.argv[1:])
