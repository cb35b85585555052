#!/usr/bin/env bash
# Issue 13, item 7, after the two wall levers (timed inputs drawn in place, outputs through device memory) and the
# spread's trace (bench/harness/isolation/runs.md, "Built since run20" and "The spread and the candidate's host
# speed"): everything they wait on, as one device call from the repository root with what the GPU image lacks in
# $CARRY. Each step has its own limit inside $BUDGET seconds, and everything comes back as one archive,
# $OUT/levers.tgz (a call returns few files).
#   probe   bench/harness/wall_probe.py: each draw (fresh, then copied, in place, into a region), the output crossings
#   cpus    bench/harness/cpu_probe.py: a timed call's host work pinned to each CPU, several sweeps over a minute
#   memory  bench/harness/data_limit_probe.py: CUDA, pinned memory and a Triton compile under RLIMIT_DATA
#   service bench/harness/service_gpu.sh: two service-path checks and a direct one (the wall, the spread, the peak)
#   peers   bench/harness/peer_gpu.sh: the honest new_gelu and the peers that touch the input and output paths
# usage: OUT=dir CARRY=.kbgpu/carry [BUDGET=560] bash bench/harness/levers_gpu.sh
set -u
export PYTHONUNBUFFERED=1
OUT="${OUT:?set OUT}"
CARRY="${CARRY:-.kbgpu/carry}"
BUDGET="${BUDGET:-560}"
export CARRY
started=$(date +%s)
work="$OUT/levers"
mkdir -p "$work/probe" "$work/svc" "$work/peers"
log="$work/levers.log"
date -u >"$log"
. bench/harness/gpu_prepare.sh "$log"
left() { echo $((BUDGET - ($(date +%s) - started))); }
step() { # step NAME LIMIT_S COMMAND...: run it under its limit (or what is left), log its exit code and wall time
    local name=$1 limit=$2
    shift 2
    ((limit > $(left) - 15)) && limit=$(($(left) - 15))
    if ((limit < 20)); then
        echo "$name skipped: $(left) s left" >>"$log"
        return
    fi
    local t0=$(date +%s)
    timeout "$limit" "$@" >>"$log" 2>&1
    echo "$name rc=$? wall_s=$(($(date +%s) - t0)) limit_s=$limit" >>"$log"
}
step probe 90 python3 bench/harness/wall_probe.py "$work/probe/wall_probe.json"
step cpus 80 python3 bench/harness/cpu_probe.py "$work/probe/cpu_probe.json"
step memory 90 python3 bench/harness/data_limit_probe.py "$work/probe/data_limit.json"
step service 200 env OUT="$work/svc" BUDGET=190 RUN_LIMIT=80 bash bench/harness/service_gpu.sh
step peers 110 env OUT="$work/peers" BUDGET_S=80 \
    PEERS="honest p17_gc_answer_copy p23_spin_for_inputs c05_side_stream" bash bench/harness/peer_gpu.sh
tar czf "$OUT/levers.tgz" -C "$OUT" levers && rm -rf "$work"
