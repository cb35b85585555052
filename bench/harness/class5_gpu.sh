#!/usr/bin/env bash
# Class 5's misfire (bench/harness/isolation/runs.md, run3-5; docs/decisions/0004), taken apart in one device call. Steps, as named in $STEPS:
#   probe           the two-process probe, bench/harness/class5_probe.py
#   direct          the harness directly on the bundled route, each timed call's wall split into its parts (the
#                   metrics' candidate_split_ms and isolation.candidate.idle_split_ms)
#   direct_nocensus the same with the kernel census (torch.profiler in both processes) left out, to see whether the
#                   profiler leaves something behind that delays the next timed calls
# From the root of a copy of this branch, with what the GPU image lacks in $CARRY (bubblewrap's .deb, structlog's wheel).
# usage: OUT=dir CARRY=../carry STEPS="probe direct" bash bench/harness/class5_gpu.sh
set -u
export PYTHONUNBUFFERED=1
OUT="${OUT:?set OUT}"
CARRY="${CARRY:-../carry}"
STEPS="${STEPS:-probe direct_nocensus}"
log="$OUT/class5.log"
{
    date -u
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"
} >"$log" 2>&1
. bench/harness/gpu_prepare.sh "$log"

summary() { # the metrics file's score and, per problem, events, wall and where the candidate's wall went
    python3 - "$1" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
print("score", m["score"], "passed", m["passed"], "wall_s", m["wall_s"])
print("isolation", {k: v for k, v in m["isolation"]["candidate"].items() if "ms" in k})
for sub in m["subtasks"]:
    d = m["details"].get(sub["id"], {})
    print(sub["id"], sub.get("candidate_ms"), d.get("candidate_wall_ms"), d.get("candidate_split_ms"),
          (sub.get("violations") or [""])[0][:90])
PY
}
for name in $STEPS; do
    echo "== $name at $(date -u +%T)" >>"$log"
    case $name in
    probe) timeout 150 python3 bench/harness/class5_probe.py --out "$OUT/probe" --calls "${PROBE_CALLS:-30}" >>"$log" 2>&1 ;;
    direct)
        PYTHONPATH=/tmp/kb-site:. timeout 150 python3 -m services.verifier.harness kernels/triton \
            --metrics "$OUT/direct.json" --shapes full >"$OUT/direct.log" 2>&1
        summary "$OUT/direct.json" >>"$log" 2>&1
        ;;
    direct_nocensus)
        PYTHONPATH=/tmp/kb-site:. timeout 150 python3 -c "
import sys
from services.verifier.harness import verify
verify.Judge.check_kernels = lambda self, triton_kernels: None  # this experiment only: no profiler anywhere
from services.verifier.harness.main import main
sys.exit(main(sys.argv[1:]))" kernels/triton --metrics "$OUT/direct_nocensus.json" --shapes full \
            >"$OUT/direct_nocensus.log" 2>&1
        summary "$OUT/direct_nocensus.json" >>"$log" 2>&1
        ;;
    esac
    echo "rc=$?" >>"$log"
done
