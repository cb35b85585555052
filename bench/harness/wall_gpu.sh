#!/usr/bin/env bash
# Issue 13, item 7: where a full check's wall goes and why short problems' times move from check to check, as one
# device call from the repository root (what the GPU image lacks in $CARRY, as for service_gpu.sh). Steps ($STEPS):
#   machine  the CPUs, their NUMA nodes, the GPU's local CPUs, the frequency governor
#   probe    bench/harness/wall_probe.py: CUDA's start, the flush, input draws, the output region's crossings
#   peers    PEERS (default "honest p21_graph_hidden_library") through peer_gpu.sh
#   profile  one direct full check with the judge under cProfile (judge.prof: where the judge's wall goes)
#   spread   SPREAD_RUNS checks of the short problems only, unpinned, then as many pinned to PIN_CPUS
# usage: OUT=dir CARRY=.kbgpu/carry [STEPS="machine probe ..."] bash bench/harness/wall_gpu.sh
set -u
export PYTHONUNBUFFERED=1
OUT="${OUT:?set OUT}"
CARRY="${CARRY:-.kbgpu/carry}"
STEPS="${STEPS:-machine probe peers profile spread}"
SHORT="${SHORT:-layer_norm new_gelu cross_entropy}"
SPREAD_RUNS="${SPREAD_RUNS:-3}"
log="$OUT/wall_gpu.log"
mkdir -p "$OUT"
date -u >"$log"
. bench/harness/gpu_prepare.sh "$log"

has() { [[ " $STEPS " == *" $1 "* ]]; }

if has machine; then
    {
        lscpu
        numactl -H 2>&1 || ls /sys/devices/system/node/
        for dev in /sys/bus/pci/drivers/nvidia/0000:*; do echo "$dev local_cpulist $(cat "$dev/local_cpulist")"; done
        cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor 2>&1
        nvidia-smi topo -m 2>&1
    } >"$OUT/machine.txt" 2>&1
fi
# The GPU's local CPUs, two of them, unless PIN_CPUS says otherwise.
gpu_cpus=$(cat /sys/bus/pci/drivers/nvidia/0000:*/local_cpulist 2>/dev/null | head -1)
PIN_CPUS="${PIN_CPUS:-$(python3 -c "
import sys
spec = sys.argv[1] or '0-1'
cpus = [c for part in spec.split(',') for c in (range(int(part.split('-')[0]), int(part.split('-')[-1]) + 1))]
print(f'{cpus[2]},{cpus[3]}' if len(cpus) > 3 else '0,1')
" "$gpu_cpus")}"
echo "gpu local cpus: ${gpu_cpus:-unknown}; pinned runs on $PIN_CPUS" >>"$log"

if has probe; then
    timeout 120 python3 bench/harness/wall_probe.py "$OUT/wall_probe.json" >>"$log" 2>&1
    echo "probe rc=$?" >>"$log"
fi
if has peers; then
    mkdir -p "$OUT/peers"
    OUT="$OUT/peers" CARRY="$CARRY" BUDGET_S=100 PEERS="${PEERS:-honest p21_graph_hidden_library}" \
        bash bench/harness/peer_gpu.sh >>"$log" 2>&1
fi
if has profile; then
    start=$(date +%s.%N)
    timeout 150 python3 -m cProfile -o "$OUT/judge.prof" -m services.verifier.harness kernels/triton \
        --metrics "$OUT/profiled.json" --shapes full >>"$log" 2>&1
    echo "profile rc=$? wall_s=$(python3 -c "print(round($(date +%s.%N) - $start, 1))")" | tee -a "$log"
    python3 -c "
import pstats, sys
stats = pstats.Stats(sys.argv[1]); stats.sort_stats('cumulative').print_stats(60)
" "$OUT/judge.prof" >"$OUT/judge_profile.txt" 2>&1
fi
if has spread; then
    for pin in none "$PIN_CPUS"; do
        for i in $(seq 1 "$SPREAD_RUNS"); do
            name="spread_${pin//,/_}_$i"
            wrap=()
            [[ "$pin" != none ]] && wrap=(taskset -c "$pin")
            start=$(date +%s.%N)
            # shellcheck disable=SC2086 # the problem ids are words
            timeout 80 "${wrap[@]}" python3 -m services.verifier.harness kernels/triton --metrics "$OUT/$name.json" \
                --shapes full --only $SHORT >>"$log" 2>&1
            echo "$name rc=$? wall_s=$(python3 -c "print(round($(date +%s.%N) - $start, 1))")" | tee -a "$log"
        done
    done
fi
date -u >>"$log"
