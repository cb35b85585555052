#!/usr/bin/env bash
# Issue 13, item 7's 1 %: is the spread a process's memory layout? The recorded checks show the score following the
# candidate process's host speed, slow or quick on most problems of a check (bench/harness/isolation/runs.md, "The
# spread and the candidate's host speed"). Besides the CPU it runs on (bench/harness/cpu_probe.py), what differs
# from one process to the next is its layout: address-space randomisation and Python's string hash seed. This runs
# the direct harness on the bundled route, alternating plain checks with checks whose judge and candidate have both
# fixed (`setarch -R`, inherited by every process it starts; PYTHONHASHSEED=0, which the judge passes on), and
# compares the spread of the scores and of the candidate's host part inside the events. Disabling randomisation in
# the candidate costs nothing it protects: the process runs untrusted code by design.
# usage (repository root, on the H200, with what the GPU image lacks in $CARRY):
#   OUT=dir CARRY=.kbgpu/carry [BUDGET=540] [SHAPES=full] bash bench/harness/layout_gpu.sh
set -u
export PYTHONUNBUFFERED=1
OUT="${OUT:?set OUT}"
BUDGET="${BUDGET:-540}"
SHAPES="${SHAPES:-full}"
export CARRY="${CARRY:-.kbgpu/carry}"
started=$(date +%s)
mkdir -p "$OUT/layout"
log="$OUT/layout/layout.log"
date -u >"$log"
[ -d "$CARRY" ] && . bench/harness/gpu_prepare.sh "$log"
summarise() { # the spreads so far: written after every pair, so that a call cut short still returns them
    for mode in plain fixed; do
        python3 bench/harness/spread_from_metrics.py --spread-of "$mode" "$OUT/layout/${mode}"_*.json
    done >"$OUT/layout/summary.txt"
}
RUN_LIMIT=75
i=0
while (($(date +%s) - started + 2 * RUN_LIMIT + 15 < BUDGET)); do # a whole pair fits in what is left
    i=$((i + 1))
    for mode in plain fixed; do
        metrics="$OUT/layout/${mode}_$i.json"
        run=(python3 -m services.verifier.harness kernels/triton --metrics "$metrics" --shapes "$SHAPES")
        [ "$mode" = fixed ] && run=(env PYTHONHASHSEED=0 setarch "$(uname -m)" -R "${run[@]}")
        t0=$(date +%s)
        timeout "$RUN_LIMIT" "${run[@]}" >>"$log" 2>&1
        echo "$mode $i rc=$? wall_s=$(($(date +%s) - t0))" >>"$log"
    done
    summarise
done
summarise
cat "$OUT/layout/summary.txt"
