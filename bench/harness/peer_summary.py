"""Folds the metrics files of peer_gpu.sh or peer_cpu.sh into one (peers.json) and prints a markdown table of what
each check said. Run again on a folder that holds only peers.json, it prints the table from that.

usage: python3 bench/harness/peer_summary.py OUT_DIR
"""

import json
import sys
from pathlib import Path


def main() -> int:
    out = Path(sys.argv[1])
    folded = out / "peers.json"
    docs = json.loads(folded.read_text()) if folded.is_file() else {}
    for path in sorted(out.glob("*.json")):
        if path != folded:
            docs[path.stem] = json.loads(path.read_text())
            path.unlink()  # the device call brings back at most 8 files: one JSON holds them all
    folded.write_text(json.dumps(docs, indent=1))
    print("| check | passed | speed-up | ref ms | cand ms | error ratio | floor fraction | violations |")
    print("|---|---|---|---|---|---|---|---|")
    for name, doc in sorted(docs.items()):
        sub = (doc.get("subtasks") or [{}])[0]
        why = "; ".join(sub.get("violations") or doc.get("reasons") or [])[:300].replace("|", "/").replace("\n", " ")
        print(
            f"| {name} | {doc.get('passed')} | {sub.get('speedup', 0):.3f} | {sub.get('reference_ms', 0):.3f} | "
            f"{sub.get('candidate_ms', 0):.3f} | {sub.get('error_ratio', 0):.2f} | "
            f"{sub.get('floor_fraction', 0):.2f} | {why} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
