#!/usr/bin/env bash
# Issue 42: does the full check of the bundled route (kernels/triton) fit the card it runs on? The check an agent runs
# (`kb verify kernels/triton --shapes full`: the judge and its confined candidate, every guardrail) three times on
# whatever card this machine has, with each problem's peak device memory (judge and candidate apart, from the metrics
# file's peak_device_bytes), its speed-up, the memory plan's need (kernels/problems/memory.py) and the card's memory
# every second. One device call from the root of a copy of the branch, with what the GPU image lacks in $CARRY
# (bubblewrap's .deb; bench/harness/gpu_prepare.sh). Everything goes under $OUT as it is written.
# usage: OUT=dir CARRY=../carry [RUNS=3] [RUN_LIMIT=150] [RULES_COMMIT=sha] bash bench/harness/fit_gpu.sh
set -u
export PYTHONUNBUFFERED=1
OUT="${OUT:?set OUT}"
CARRY="${CARRY:-../carry}"
RUNS="${RUNS:-3}"
RUN_LIMIT="${RUN_LIMIT:-150}" # one check; a full one took 60-110 s on the H200 and an H100
log="$OUT/fit.log"
{
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader
    python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)"
    python3 -c "import torch; f, t = torch.cuda.mem_get_info(); print(f'free {f / 2**30:.1f} GiB of {t / 2**30:.1f} GiB')"
    echo "the memory plan (python -m kernels.problems.memory):"
    python3 -m kernels.problems.memory
} >"$log" 2>&1

. bench/harness/gpu_prepare.sh "$log" # the job user and bubblewrap: the judge runs no route code as root without them

nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv,noheader -l 1 >"$OUT/gpumem.csv" 2>&1 &
smi=$!

for run in $(seq 1 "$RUNS"); do
    echo "== run $run at $(date -u +%T)" >>"$log"
    start=$(date +%s.%N)
    timeout "$RUN_LIMIT" python3 -m services.verifier.harness kernels/triton --metrics "$OUT/fit_$run.json" \
        --shapes full --rules scienceslack.json --rules-commit "${RULES_COMMIT:-unknown}" >>"$log" 2>&1
    rc=$?
    printf "run %s rc=%s wall_s=%s\n" "$run" "$rc" "$(python3 -c "print(round($(date +%s.%N) - $start, 1))")" |
        tee -a "$OUT/fit_summary.txt"
done
kill "$smi" 2>/dev/null

python3 - "$OUT" <<'PY' | tee -a "$OUT/fit_summary.txt"
import json, sys
from pathlib import Path

from kernels.problems import memory

runs = []
for path in sorted(Path(sys.argv[1]).glob("fit_*.json")):
    try:
        runs.append(json.loads(path.read_text()))
    except (OSError, ValueError) as err:
        print(f"{path.name}: unreadable ({err})")
gib = 2**30
for i, doc in enumerate(runs, 1):
    print(f"run {i}: passed={doc.get('passed')} verified={doc.get('verified')} incomplete={doc.get('incomplete')} "
          f"score={doc.get('score', 0):.3f} wall_s={doc.get('wall_s', 0):.1f} runner={doc.get('runner')}")
    for reason in doc.get("reasons", []) + doc.get("not_verified_because", []):
        print(f"  {reason}")
ids = [s["id"] for s in runs[0]["subtasks"]] if runs else []
plan = memory.plan(ids) if ids else {}
print(f"{'problem':22}{'plan GiB':>9}" + "".join(f"{'x' + str(i):>8}{'judge' + str(i):>8}{'cand' + str(i):>8}"
                                                for i in range(1, len(runs) + 1)))
for pid in ids:
    row = f"{pid:22}{plan[pid].total / gib:>9.1f}"
    for doc in runs:
        sub = next((s for s in doc["subtasks"] if s["id"] == pid), {})
        peak = sub.get("peak_device_bytes", {})
        speedup = f"{sub.get('speedup', 0):.3f}" if not sub.get("not_judged") else "n/j"
        row += f"{speedup:>8}{peak.get('judge', 0) / gib:>8.1f}{peak.get('candidate', 0) / gib:>8.1f}"
    notes = {s.get("not_judged") or "; ".join(s.get("violations", [])) for d in runs for s in d["subtasks"]
             if s["id"] == pid and (s.get("not_judged") or not s.get("passed", True))}
    print(row + "".join(f"  {n[:200]}" for n in notes if n))
used = [line.split(",")[1].strip() for line in Path(sys.argv[1], "gpumem.csv").read_text().splitlines()
        if line.count(",") >= 2]
mib = [int(u.split()[0]) for u in used if u.split()[0].isdigit()]
if mib:
    print(f"card memory used, whole device, sampled each second: peak {max(mib) / 1024:.1f} GiB")
PY
