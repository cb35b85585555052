"""Summarise a GPU run's metrics files: per-problem speed-ups of the two reference runs and their spread, the honest
route, and what caught each cheat. usage: python3 bench/harness/summarize.py DIR"""

import json
import sys
from pathlib import Path


def load(path: Path):
    return json.loads(path.read_text()) if path.is_file() else None


def main(directory: str) -> None:
    d = Path(directory)
    runs = [load(d / f"reference_{i}.json") for i in (1, 2)]
    if all(runs) and all(r.get("subtasks") for r in runs):
        a, b = runs
        print(
            f"reference runs: score {a['score']:.4f} / {b['score']:.4f} "
            f"(diff {100 * (b['score'] / a['score'] - 1):+.2f} %), wall {a['wall_s']:.1f} s / {b['wall_s']:.1f} s, "
            f"passed {a['passed']} / {b['passed']}, verified {a['verified']} / {b['verified']}, runner {a['runner']}"
        )
        print("| problem | ref ms (1) | cand ms (1) | speed-up 1 | speed-up 2 | diff % | err ratio | floor frac |")
        print("|---|---|---|---|---|---|---|---|")
        for s1, s2 in zip(a["subtasks"], b["subtasks"], strict=True):
            diff = 100 * (s2["speedup"] / s1["speedup"] - 1) if s1["speedup"] else float("nan")
            print(
                f"| {s1['id']} | {s1['reference_ms']:.3f} | {s1['candidate_ms']:.3f} | {s1['speedup']:.4f} | "
                f"{s2['speedup']:.4f} | {diff:+.2f} | {s1['error_ratio']:.2f} | {s1['floor_fraction']:.3f} |"
            )
        for doc in runs:
            for reason in doc["reasons"]:
                print("  broken:", reason)
    honest = load(d / "honest.json")
    if honest and honest.get("subtasks"):
        print(f"\nhonest Triton route: passed {honest['passed']}, wall {honest['wall_s']:.1f} s")
        for s in honest["subtasks"]:
            if s["submitted"]:
                print(
                    f"  {s['id']}: speed-up {s['speedup']:.3f}, ref {s['reference_ms']:.3f} ms, "
                    f"cand {s['candidate_ms']:.3f} ms, err ratio {s['error_ratio']:.2f}, {s['violations']}"
                )
    cheats = load(d / "cheats.json")
    if cheats:
        print("\ncheats (static pass skipped):")
        for name, doc in cheats.items():
            print(f"  {name}: passed {doc['passed']}; {'; '.join(doc['reasons'])[:300]}")


if __name__ == "__main__":
    main(sys.argv[1])
