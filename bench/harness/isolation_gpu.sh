#!/usr/bin/env bash
# Issue 13, item 7: the check the service's way on the H200 -- the worker's sandbox, checks/verify.sbatch, the judge and
# its confined candidate process, the GPU devices passed in -- for the bundled route (kernels/triton), twice; the same
# route through the harness directly (after the split), and through the harness before the split (the cost of
# isolation); then every cheat and attack with the static pass skipped. One device call, from the root of a copy of
# this branch, with the pre-split tree in $OLD and what the GPU image lacks in $CARRY (bubblewrap's .deb, structlog's
# wheel: services/common/sandbox.py logs through structlog).
# usage: OUT=dir OLD=../old CARRY=../carry bash bench/harness/isolation_gpu.sh
set -u
export PYTHONUNBUFFERED=1
OUT="${OUT:?set OUT}"
OLD="${OLD:-../old}"
CARRY="${CARRY:-../carry}"
log="$OUT/isolation.log"
start_all=$(date +%s)
{
    date -u
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)"
    uname -r
} >"$log" 2>&1

. bench/harness/gpu_prepare.sh "$log"
. bench/harness/gpu_steps.sh


step before 200 bash -c "cd '$OLD' && python3 -m services.verifier.harness kernels/triton --metrics '$OUT/before.json' --shapes full"
step direct 150 python3 -m services.verifier.harness kernels/triton --metrics "$OUT/direct.json" --shapes full
step service 300 env PYTHONPATH=/tmp/kb-site:. python3 -m bench.harness.service_path kernels/triton "$OUT" --runs 2
for f in "$OUT"/service_*.log; do { echo "== $f"; cat "$f"; } >>"$log" && rm -f "$f"; done
step cheats 120 python3 -m bench.harness.run_cheats "$OUT/cheats.json" --shapes full
python3 bench/harness/isolation_summary.py "$OUT" | tee -a "$OUT/summary.txt"
