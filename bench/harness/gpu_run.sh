#!/usr/bin/env bash
# The harness's GPU run (issue 5, item 7), as one device call:
#   1. the reference itself as a route, full shapes, all 12 problems -- twice, in two processes (run-to-run spread,
#      and the time a whole check takes, process start included);
#   2. the small honest Triton route (new_gelu, hinge_loss) at full shapes;
#   3. the 11 cheat routes with the static pass skipped, so that the dynamic defenses must catch them.
# usage (from the repository root): OUT=dir bash bench/harness/gpu_run.sh
set -u
export PYTHONUNBUFFERED=1
OUT="${OUT:?set OUT}"
SHAPES="${SHAPES:-full}"
log="$OUT/gpu_run.log"
{
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
    python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"
} >"$log" 2>&1

step() {  # step NAME LIMIT_S COMMAND...: run, log, and record its exit code and wall time
    local name=$1 limit=$2
    shift 2
    local start end rc
    start=$(date +%s.%N)
    timeout "$limit" "$@" >>"$log" 2>&1
    rc=$?
    end=$(date +%s.%N)
    printf "%-14s rc=%-3s wall_s=%s\n" "$name" "$rc" "$(python3 -c "print(round($end - $start, 1))")" | tee -a "$OUT/summary.txt"
}

for i in $(seq 1 "${REFERENCE_RUNS:-2}"); do
    echo "== reference run $i" >>"$log"
    step "reference_$i" 100 python3 -m services.verifier.harness tests/harness/routes/reference \
        --metrics "$OUT/reference_$i.json" --shapes "$SHAPES"
done
echo "== honest Triton route" >>"$log"
step honest 45 python3 -m services.verifier.harness tests/harness/routes/honest \
    --metrics "$OUT/honest.json" --shapes "$SHAPES" --only new_gelu hinge_loss
echo "== cheats, static pass skipped" >>"$log"
step cheats 80 python3 -m bench.harness.run_cheats "$OUT/cheats.json" --shapes "$SHAPES"
python3 bench/harness/summarize.py "$OUT" | tee "$OUT/summary.md"
