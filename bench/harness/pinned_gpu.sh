#!/usr/bin/env bash
# Issue 13, item 7's 1 %: is the spread where the candidate runs? In run21 cpu_probe.py found one CPU of the H200
# machine slow in every sweep (a timed call's host part 31-38 us against 21-22 us) and others slow in some; the
# candidate's host part inside the events (even a bare event record) moved 2.5x from check to check while the
# reference stayed within 1 % (bench/harness/isolation/runs.md, run22). A fixed layout did not narrow it (run22).
# First, how long a CPU stays quick or slow: cpu_probe.py sweeps every CPU once a second for about 30 s (a pin chosen
# at a check's start can only hold if the states outlast a check). Then it alternates plain direct checks of the
# bundled route with checks pinned (judge and candidate: the affinity is inherited) to the four CPUs quickest in a
# sweep made just before, and compares the two spreads, measured in the same call on the same machine.
# usage (repository root, on the H200):
#   OUT=dir CARRY=.kbgpu/carry [BUDGET=540] [SHAPES=full] bash bench/harness/pinned_gpu.sh
set -u
export PYTHONUNBUFFERED=1
OUT="${OUT:?set OUT}"
BUDGET="${BUDGET:-540}"
SHAPES="${SHAPES:-full}"
RUN_LIMIT="${RUN_LIMIT:-60}"
export CARRY="${CARRY:-.kbgpu/carry}"
started=$(date +%s)
mkdir -p "$OUT/pinned"
log="$OUT/pinned/pinned.log"
date -u >"$log"
[ -d "$CARRY" ] && . bench/harness/gpu_prepare.sh "$log"
{ nvidia-smi topo -m; lscpu; grep -H . /sys/bus/pci/devices/*/numa_node 2>/dev/null | grep -v ':-1$'; } \
    >"$OUT/pinned/topology.txt" 2>&1
timeout 60 python3 bench/harness/cpu_probe.py "$OUT/pinned/cpu_series.json" --sweeps 30 --pause 1 --calls 100 \
    >>"$log" 2>&1
quickest() { # the four CPUs whose small launch's host part was least in one short sweep
    timeout 30 python3 bench/harness/cpu_probe.py "$OUT/pinned/sweep_$1.json" --sweeps 1 --calls 100 >/dev/null 2>&1
    python3 - "$OUT/pinned/sweep_$1.json" <<'PY'
import json, sys
per_cpu = json.load(open(sys.argv[1]))["sweeps"][0]["per_cpu"]
host = {cpu: per_cpu[cpu]["launch"]["host"] for cpu in per_cpu}
print(",".join(sorted(sorted(host, key=host.get)[:4], key=int)))
PY
}
summarise() { # after every pair, so that a call cut short still returns the spreads so far
    for mode in plain pinned; do
        python3 bench/harness/spread_from_metrics.py --spread-of "$mode" "$OUT/pinned/${mode}"_*.json
    done >"$OUT/pinned/summary.txt"
}
i=0
while (($(date +%s) - started + 2 * RUN_LIMIT + 20 < BUDGET)); do # a whole pair fits in what is left
    i=$((i + 1))
    for mode in plain pinned; do
        run=(python3 -m services.verifier.harness kernels/triton --metrics "$OUT/pinned/${mode}_$i.json" --shapes "$SHAPES")
        if [ "$mode" = pinned ]; then
            cpus=$(quickest "$i")
            echo "pinned $i to CPUs $cpus" >>"$log"
            run=(taskset -c "$cpus" "${run[@]}")
        fi
        t0=$(date +%s)
        timeout "$RUN_LIMIT" "${run[@]}" >>"$log" 2>&1
        echo "$mode $i rc=$? wall_s=$(($(date +%s) - t0))" >>"$log"
    done
    summarise
done
summarise
cat "$OUT/pinned/summary.txt"
