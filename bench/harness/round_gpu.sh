#!/usr/bin/env bash
# One device call for issues 13 and 18, from the root of a copy of the repository on the H200 (what the GPU image lacks
# in $CARRY, as for service_gpu.sh): (1) the matmul sweep, whose winner becomes the route's default for this call when
# it beats the shipped one from an idle GPU (matmul_sweep.py --ship prints the edit, to be committed as measured);
# (2) each problem's host cost a call; (3) the service path twice and the harness directly (service_gpu.sh); (4) the
# peer cheats that need a GPU, static pass skipped (peer_gpu.sh). Each step has its own limit inside $BUDGET seconds.
# BASELINE (optional): an earlier kernels/triton, timed beside this one for the host cost and judged instead of it if
# this one fails at smoke shapes on the GPU.
# usage: OUT=dir CARRY=../carry BUDGET=540 [BASELINE=../baseline/kernels/triton] bash bench/harness/round_gpu.sh
set -u
export PYTHONUNBUFFERED=1
OUT="${OUT:?set OUT}"
CARRY="${CARRY:-../carry}"
BUDGET="${BUDGET:-540}"
start_all=$(date +%s)
left() { echo $((BUDGET - ($(date +%s) - start_all))); }
mkdir -p "$OUT/matmul" "$OUT/launch" "$OUT/service" "$OUT/peers"
# The smoke check below runs the candidate as the job user under bubblewrap, as every check does.
. bench/harness/gpu_prepare.sh "$OUT/prepare.log"

timeout 100 python3 bench/kernels/matmul_sweep.py --out "$OUT/matmul" --budget-s 80 >"$OUT/matmul/stdout.log" 2>&1
echo "matmul sweep rc=$? at $(($(date +%s) - start_all)) s" | tee "$OUT/round.txt"
python3 bench/kernels/matmul_sweep.py --ship "$OUT/matmul/matmul_sweep.json" 2>&1 | tee -a "$OUT/round.txt"

# The route's host path has only run under the interpreter: checked at smoke shapes on this GPU with every guardrail
# before the timed runs; if it fails, $BASELINE (the route before that change) is what the runs below judge.
timeout 90 python3 -m services.verifier.harness kernels/triton --metrics "$OUT/smoke.json" --shapes smoke \
    >"$OUT/smoke.log" 2>&1
smoke=$?
echo "route at smoke shapes rc=$smoke at $(($(date +%s) - start_all)) s" | tee -a "$OUT/round.txt"
if ((smoke != 0)) && [ -n "${BASELINE:-}" ]; then
    rm -rf kernels/triton && cp -r "$BASELINE" kernels/triton
    echo "route: judged as $BASELINE from here on" | tee -a "$OUT/round.txt"
fi

timeout 60 python3 bench/kernels/launch_overhead.py --out "$OUT/launch" --runs 30 ${BASELINE:+--baseline "$BASELINE"} \
    >"$OUT/launch/stdout.log" 2>&1
echo "launch rc=$? at $(($(date +%s) - start_all)) s" | tee -a "$OUT/round.txt"

service_budget=$(($(left) - 140))
((service_budget > 300)) && service_budget=300
OUT="$OUT/service" CARRY="$CARRY" BUDGET=$service_budget RUN_LIMIT=100 bash bench/harness/service_gpu.sh >>"$OUT/round.txt" 2>&1
echo "service path done at $(($(date +%s) - start_all)) s" | tee -a "$OUT/round.txt"

peer_budget=$(($(left) - 70))
if ((peer_budget > 30)); then
    OUT="$OUT/peers" CARRY="$CARRY" BUDGET_S=$peer_budget bash bench/harness/peer_gpu.sh >>"$OUT/round.txt" 2>&1
fi
echo "round done at $(($(date +%s) - start_all)) s" | tee -a "$OUT/round.txt"
