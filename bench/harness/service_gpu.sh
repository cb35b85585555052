#!/usr/bin/env bash
# Issue 13, item 7, second attempt: the check the service's way on the H200 (the worker's sandbox, checks/verify.sbatch,
# the judge and its confined candidate, the GPU devices passed in) for the bundled route kernels/triton twice, then the
# harness directly once if time is left. One device call, from the root of a copy of this branch, with what the GPU
# image lacks in $CARRY (bubblewrap's Debian .deb; structlog's wheel, which services/common/sandbox.py logs through).
# Every step has its own limit inside $BUDGET seconds, so that one failure does not eat the call; logs, metrics and a
# GPU memory trace are written under $OUT as they go.
# usage: OUT=dir CARRY=../carry BUDGET=440 [DIRECTS=1] [ONLY="id ..."] bash bench/harness/service_gpu.sh
set -u
export PYTHONUNBUFFERED=1
OUT="${OUT:?set OUT}"
CARRY="${CARRY:-../carry}"
BUDGET="${BUDGET:-440}"
RUN_LIMIT="${RUN_LIMIT:-140}" # one service-path check, enforced by the worker's sandbox itself
DIRECTS="${DIRECTS:-1}"       # direct checks after the service path's two, as many as fit the budget
ONLY="${ONLY:-}"              # problem ids to judge alone (an unverified check), e.g. all that fit an 80 GB card
only=()
[ -n "$ONLY" ] && only=(--only $ONLY)
start_all=$(date +%s)
log="$OUT/gpu.log"
{
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)"
    uname -r
    nproc
} >"$log" 2>&1

. bench/harness/gpu_prepare.sh "$log"
. bench/harness/gpu_steps.sh

# GPU memory of the whole card every second: the judge ran out of it at rms_norm in the first attempt.
nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv,noheader -l 1 >"$OUT/gpumem.csv" 2>&1 &
smi=$!


for run in 1 2; do
    limit=$(($(left) - 10))
    ((limit > RUN_LIMIT + 20)) && limit=$((RUN_LIMIT + 20))
    ((limit < 60)) && { echo "service_$run: skipped, $(left)s left" | tee -a "$OUT/summary.txt"; continue; }
    step "service_$run" "$limit" env PYTHONPATH=/tmp/kb-site:. python3 -m bench.harness.service_path kernels/triton \
        "$OUT" --runs 1 --first "$run" --time-limit $((limit - 20)) ${ONLY:+--verify-args "--only $ONLY"}
done
limit=$(($(left) - 5))
if ((limit >= 60)); then
    step direct "$limit" python3 -m services.verifier.harness kernels/triton --metrics "$OUT/direct.json" --shapes full \
        "${only[@]}"
else
    echo "direct: skipped, $(left)s left" | tee -a "$OUT/summary.txt"
fi
# More direct checks while the budget holds one more (about 50 s each on the H200), for the spread between checks.
for ((k = 2; k <= DIRECTS; k++)); do
    limit=$(($(left) - 5))
    ((limit < 60)) && break
    step "direct_$k" "$limit" python3 -m services.verifier.harness kernels/triton --metrics "$OUT/direct_$k.json" \
        --shapes full "${only[@]}"
done
kill "$smi" 2>/dev/null
python3 bench/harness/isolation_summary.py "$OUT" | tee -a "$OUT/summary.txt"
python3 bench/harness/spread_from_metrics.py --spread-of "all checks" "$OUT"/service_*.json "$OUT"/direct*.json |
    tee -a "$OUT/summary.txt"
