# Sourced by the device scripts (bench/harness/*_gpu.sh) after gpu_prepare.sh, with $OUT, $log and $start_all (the
# script's start, date +%s) set, and $BUDGET where the script uses left.
#   step NAME LIMIT_S COMMAND...  run it under its limit, log it, record its exit code and wall time in summary.txt
#   left                          the seconds of $BUDGET not yet spent
step() {
    local name=$1 limit=$2
    shift 2
    echo "== $name (limit ${limit}s, at $(($(date +%s) - start_all))s): $*" >>"$log"
    local start rc
    start=$(date +%s.%N)
    timeout "$limit" "$@" >>"$log" 2>&1
    rc=$?
    printf "%-10s rc=%-3s wall_s=%s\n" "$name" "$rc" "$(python3 -c "print(round($(date +%s.%N) - $start, 1))")" |
        tee -a "$OUT/summary.txt"
}
left() { echo $((BUDGET - ($(date +%s) - start_all))); }
