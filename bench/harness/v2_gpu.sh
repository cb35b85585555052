#!/usr/bin/env bash
# Verifier version 2 on a lent GPU, one device call (issue 36, item 4; issue 39, item 1): the gate's two-process probe
# (bench/harness/gate_probe.py: version 2's and version 1's medians side by side, the judge's clock against the
# events), then the bundled route kernels/triton checked directly by the harness, then the service's way (worker
# sandbox, checks/verify.sbatch, judge and confined candidate) as many times as the budget holds (three asked).
# From the repository root, with what the image lacks in $CARRY (bubblewrap's .deb, structlog's wheel: gpu_prepare.sh).
# usage: OUT=dir CARRY=.carry BUDGET=560 [PROBE=1] [SERVICE_RUNS=3] bash bench/harness/v2_gpu.sh
set -u
export PYTHONUNBUFFERED=1
OUT="${OUT:?set OUT}"
CARRY="${CARRY:-.carry}"
BUDGET="${BUDGET:-560}"
PROBE="${PROBE:-1}"
SERVICE_RUNS="${SERVICE_RUNS:-3}"
start_all=$(date +%s)
log="$OUT/gpu.log"
{
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)"
    nproc
} >"$log" 2>&1
. bench/harness/gpu_prepare.sh "$log"
. bench/harness/gpu_steps.sh
if [ "$PROBE" = 1 ]; then
    step probe 150 python3 bench/harness/gate_probe.py --out "$OUT/probe" --passes 2 --runs 100
fi
step direct $(($(left) - 10)) python3 -m services.verifier.harness kernels/triton --metrics "$OUT/direct.json" --shapes full
if [ ! -s "$OUT/direct.json" ]; then # the harness could not judge here: the gate's own probe says why, instead
    step probe $(($(left) - 10)) python3 bench/harness/gate_probe.py --out "$OUT/probe" --passes 1 --runs 50
    SERVICE_RUNS=0
fi
for ((run = 1; run <= SERVICE_RUNS; run++)); do
    limit=$(($(left) - 5))
    ((limit < 70)) && { echo "service_$run: skipped, $(left)s left" | tee -a "$OUT/summary.txt"; continue; }
    step "service_$run" "$limit" env PYTHONPATH=/tmp/kb-site:. python3 -m bench.harness.service_path kernels/triton \
        "$OUT" --runs 1 --first "$run" --time-limit $((limit - 15))
done
python3 - "$OUT" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
from pathlib import Path
for path in sorted(Path(sys.argv[1]).glob("*.json")):
    if path.name.startswith(("direct", "service_")):
        doc = json.loads(path.read_text())
        print(path.name, doc.get("passed"), round(doc.get("score", 0), 4), doc.get("score_interval"), doc.get("wall_s"))
        for sub in doc.get("subtasks", []):
            det = doc.get("details", {}).get(sub["id"], {})
            print(f"  {sub['id']:20s} {sub['speedup']:8.4f} {sub.get('speedup_interval')} "
                  f"scored_by_judge={det.get('calls_scored_by_the_judge')} late={det.get('judge_late_ms')} "
                  f"{'; '.join(sub['violations'])[:200]}")
PY
