"""Folds the metrics files of peer_gpu.sh or peer_cpu.sh into one (peers.json) and prints a markdown table of what
each check said.

usage: python3 bench/harness/peer_summary.py OUT_DIR
"""

import json
import sys
from pathlib import Path


def main() -> int:
    out = Path(sys.argv[1])
    docs = {}
    for path in sorted(out.glob("*.json")):
        if path.name == "peers.json":
            continue
        docs[path.stem] = json.loads(path.read_text())
        path.unlink()  # the device call brings back at most 8 files: one JSON holds them all
    (out / "peers.json").write_text(json.dumps(docs, indent=1))
    print("| check | passed | speed-up | ref ms | cand ms | floor fraction | violations |")
    print("|---|---|---|---|---|---|---|")
    for name, doc in docs.items():
        subs = doc.get("subtasks") or [{}]
        sub = subs[0]
        why = "; ".join(sub.get("violations") or doc.get("reasons") or [])[:400]
        print(
            f"| {name} | {doc.get('passed')} | {sub.get('speedup', 0):.3f} | {sub.get('reference_ms', 0):.3f} | "
            f"{sub.get('candidate_ms', 0):.3f} | {sub.get('floor_fraction', 0):.2f} | {why} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
