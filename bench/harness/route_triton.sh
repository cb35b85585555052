#!/usr/bin/env bash
# The project's own route (kernels/triton) through the full harness on the pinned GPU, twice (run-to-run spread),
# as a maintainer would see its check: every guardrail, full shapes, all 12 problems.
# usage (repository root, on the H200): OUT=dir RULES_COMMIT=sha bash bench/harness/route_triton.sh
set -u
export PYTHONUNBUFFERED=1
OUT="${OUT:?set OUT}"
log="$OUT/route_triton.log"
{
    date -u
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
    python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
} >"$log" 2>&1
for i in 1 2; do
    start=$(date +%s.%N)
    timeout 240 python3 -m services.verifier.harness kernels/triton --metrics "$OUT/route_triton_$i.json" \
        --shapes full --rules scienceslack.json --rules-commit "${RULES_COMMIT:-unknown}" >>"$log" 2>&1
    rc=$?
    printf "run %s rc=%s wall_s=%s\n" "$i" "$rc" "$(python3 -c "print(round($(date +%s.%N) - $start, 1))")" |
        tee -a "$OUT/route_triton_summary.txt"
done
python3 - "$OUT" <<'PY' | tee -a "$OUT/route_triton_summary.txt"
import json, sys
from pathlib import Path
runs = [json.loads(p.read_text()) for p in sorted(Path(sys.argv[1]).glob("route_triton_*.json"))]
for i, doc in enumerate(runs, 1):
    print(f"run {i}: passed={doc['passed']} verified={doc.get('verified')} score={doc['score']:.3f} "
          f"cost={doc['cost']:.1f} GPU-s reasons={doc.get('reasons')}")
print(f"{'problem':22}" + "".join(f"{'speedup ' + str(i):>12}{'floor ' + str(i):>10}" for i in range(1, len(runs) + 1)))
for k, sub in enumerate(runs[0]["subtasks"]):
    row = f"{sub['id']:22}"
    for doc in runs:
        s = doc["subtasks"][k]
        row += f"{s['speedup']:>12.3f}{s['floor_fraction']:>10.2f}"
    print(row + ("" if all(d["subtasks"][k]["passed"] for d in runs) else "  FAILED " + "; ".join(
        v for d in runs for v in d["subtasks"][k]["violations"])))
PY
