#!/usr/bin/env bash
# Whether the GPU image's Python has bytecode for torch, what importing torch costs without and with it, and then
# the service path twice and the harness directly on the bundled route (service_gpu.sh) with the bytecode in place:
# the process wall of a check on a machine where torch was installed as pip installs it (bytecode compiled).
# usage (from the repository root, on the H200): OUT=dir CARRY=.kbgpu/carry [BUDGET=250] bash bench/harness/bytecode_gpu.sh
set -u
OUT="${OUT:?set OUT}"
mkdir -p "$OUT/svc"
log="$OUT/bytecode.log"
site=$(python3 -c "import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))" 2>/dev/null)
import_s() { python3 -c "import time; t = time.perf_counter(); import torch; print(round(time.perf_counter() - t, 2))"; }
{
    date -u
    echo "site-packages: $site"
    env | grep '^PYTHON' || echo "no PYTHON* variables"
    echo "torch .pyc files: $(find "$site/torch" -name '*.pyc' 2>/dev/null | wc -l) of $(find "$site/torch" -name '*.py' | wc -l) sources"
    echo "import torch, as the image is: $(import_s) s, again: $(import_s) s"
    start=$(date +%s.%N)
    python3 -m compileall -q -j 0 "$site" >/dev/null 2>&1
    echo "compileall rc=$? in $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s"
    echo "torch .pyc files now: $(find "$site/torch" -name '*.pyc' | wc -l)"
    echo "import torch, with bytecode: $(import_s) s, again: $(import_s) s"
} >"$log" 2>&1
OUT="$OUT/svc" CARRY="${CARRY:-.kbgpu/carry}" BUDGET="${BUDGET:-250}" RUN_LIMIT=80 bash bench/harness/service_gpu.sh >/dev/null 2>&1
cat "$log"
