#!/usr/bin/env bash
# The peer cheats that need a GPU (issue 13, item 6) as one device call: each a check of its own (a fresh
# `python -m services.verifier.harness` process, the judge and its confined candidate), full shapes, static pass
# skipped so that the dynamic defenses alone must stop it; the honest Triton new_gelu first as the yardstick.
# The GPU image lacks bubblewrap: its Debian package goes along in $CARRY (apt-get download bubblewrap).
# usage (from the repository root, on the H200): OUT=dir CARRY=dir [PEERS="honest p03_library_slowdown"] bash
# bench/harness/peer_gpu.sh   (PEERS: only the checks of these routes)
set -u
export PYTHONUNBUFFERED=1
OUT="${OUT:?set OUT}"
BUDGET_S="${BUDGET_S:-270}"
CARRY="${CARRY:-carry}"
log="$OUT/peer_gpu.log"
{
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
    python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"
    git log -1 --format='commit %H %s' 2>/dev/null || echo "commit: no git here"
} >"$log" 2>&1
# The judge refuses to run untrusted code as root without its job user (services/verifier/harness/confine.py).
. bench/harness/gpu_prepare.sh "$log"
started=$(date +%s)

check() {  # check ROUTE_DIR PROBLEM: one check, its exit code and wall time in summary.txt
    local dir=$1 problem=$2 name
    name=$(basename "$dir")
    [ -n "${PEERS:-}" ] && [[ " $PEERS " != *" $name "* ]] && return
    if (($(date +%s) - started > BUDGET_S)); then
        printf "%-26s skipped: out of time\n" "$name" | tee -a "$OUT/summary.txt"
        return
    fi
    echo "== $name ($problem)" >>"$log"
    local t0 rc
    t0=$(date +%s.%N)
    timeout 60 python3 -m services.verifier.harness "$dir" --metrics "$OUT/$name.json" --shapes full --only "$problem" \
        --skip-static >>"$log" 2>&1
    rc=$?
    printf "%-26s rc=%-3s wall_s=%s\n" "$name" "$rc" "$(python3 -c "print(round($(date +%s.%N) - $t0, 1))")" |
        tee -a "$OUT/summary.txt"
}

check tests/harness/routes/honest new_gelu
check tests/harness/cheats/p20_precompute_on_refresh new_gelu
check tests/harness/cheats/p21_graph_hidden_library new_gelu
check kernels/triton layer_norm
check tests/harness/cheats/p22_precompute_then_copy layer_norm
check tests/harness/cheats/p23_spin_for_inputs new_gelu
check tests/harness/cheats/p24_poll_for_inputs new_gelu
check tests/harness/cheats/c05_side_stream new_gelu
check tests/harness/cheats/c07_l2_persisting new_gelu
check tests/harness/cheats/p16_l2_persisting_window layer_norm
check tests/harness/cheats/p14_worker_thread new_gelu
check tests/harness/cheats/p18_blinded_timer_patch new_gelu
check tests/harness/cheats/p05_tf32_switches matmul
check tests/harness/cheats/p03_library_slowdown matmul
python3 bench/harness/peer_summary.py "$OUT" | tee "$OUT/summary.md"
