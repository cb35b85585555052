#!/usr/bin/env bash
# One device call for the Triton route (issue 18): the kernel bench with both timings (back to back and from an idle
# GPU), the verifier's check of the route twice, and the host launch cost per call; everything lands in one tarball
# (the device tool returns at most 8 files).
# usage (repository root, on the H200): OUT=dir RULES_COMMIT=sha bash bench/kernels/gpu_round.sh
set -u
export PYTHONUNBUFFERED=1
OUT="${OUT:?set OUT}"
res=/tmp/round
mkdir -p "$res/bench" "$res/verifier" "$res/launch"
finish() { tar czf "$OUT/round.tar.gz" -C "$res" . ; cp "$res/round.log" "$OUT/" 2>/dev/null; }
trap finish EXIT
{
    date -u
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
    # every problem but matmul in one process; matmul (new TMA variants: a fault there must not cost the others) next
    timeout 170 python3 bench/kernels/run.py --out "$res/bench" --variant-runs 20 --only new_gelu hinge_loss \
        huber_loss kl_div triplet_margin_loss cross_entropy rms_norm layer_norm sum_dim cumsum_reverse log_softmax
    echo "bench rc=$?"
    OUT="$res/verifier" RULES_COMMIT="${RULES_COMMIT:-unknown}" timeout 120 bash bench/harness/route_triton.sh
    echo "verifier rc=$?"
    timeout 60 python3 bench/kernels/run.py --out "$res/bench" --variant-runs 20 --only matmul \
        --merge "$res/bench/h200.json"
    echo "matmul rc=$?"
    timeout 45 python3 bench/kernels/launch_overhead.py --out "$res/launch" --runs 30
    echo "launch rc=$?"
    date -u
} 2>&1 | tee "$res/round.log"
