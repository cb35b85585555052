#!/usr/bin/env bash
# The peer cheats of tests/harness/cheats/p* on the CPU profile (smoke shapes, static pass skipped), each a check of
# its own, as tests/harness/test_peer_cheats.py runs them: the table in tests/harness/cheats/README.md comes from two
# runs of this, one in a checkout of main before the split and one on this branch.
# usage (from the repository root): OUT=dir bash bench/harness/peer_cpu.sh
set -u
OUT="${OUT:?set OUT}"
mkdir -p "$OUT"
: >"$OUT/summary.txt"
export TRITON_INTERPRET=1 PYTHONPATH="$PWD:$PWD/protos"
PY="${PY:-.venv/bin/python}"
for dir in tests/harness/cheats/p*/; do
    name=$(basename "$dir")
    [ "$name" = p16_l2_persisting_window ] && continue # GPU only: peer_gpu.sh
    problem=$(basename "$(ls "$dir"*.py)" .py)
    t0=$(date +%s.%N)
    timeout 300 "$PY" -m services.verifier.harness "$dir" --metrics "$OUT/$name.json" --shapes smoke --device cpu \
        --only "$problem" --skip-static >"$OUT/$name.log" 2>&1
    rc=$?
    printf "%-26s rc=%-3s wall_s=%s\n" "$name" "$rc" "$(python3 -c "print(round($(date +%s.%N) - $t0, 1))")" |
        tee -a "$OUT/summary.txt"
    rm -f "$OUT/$name.log" tests/harness/cheats/p12_file_replay/kb-replay-kl_div.pt /tmp/kb-replay-kl_div.pt
done
"$PY" bench/harness/peer_summary.py "$OUT" | tee "$OUT/summary.md"
