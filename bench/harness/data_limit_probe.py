"""Can RLIMIT_DATA cap a GPU candidate's host memory? (issue 13, item 2's memory cap where no cgroup can be made.)

Where the judge cannot make a cgroup (the H200 image: bench/harness/isolation, every run), a GPU candidate has no
host-memory cap today: RLIMIT_AS cannot be used there, since the CUDA driver reserves far more address space than it
uses. RLIMIT_DATA (Linux 4.7 on) counts only private writable mappings, which address-space reservations
(PROT_NONE) and the driver's shared mappings of /dev/nvidia* are not. This probe runs a child under
``prlimit --data=CAP`` that starts CUDA, allocates device memory, pins host memory, compiles and runs a Triton kernel,
and then allocates host memory past the cap, and reports which steps worked: everything but the last means the cap
can be used for GPU candidates.

usage: python3 bench/harness/data_limit_probe.py OUT.json [--cap-gib 32 4]
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, sys
steps = {}
def step(name, run):
    try:
        run()
        steps[name] = "ok"
    except BaseException as err:
        steps[name] = f"{type(err).__name__}: {str(err)[:200]}"
import torch
cap = int(sys.argv[1])
cuda = torch.cuda.is_available()
if cuda:
    step("cuda_init", lambda: torch.empty(1, device="cuda"))
    step("device_4gb", lambda: torch.empty(4 << 30, dtype=torch.uint8, device="cuda").fill_(1))
    step("pinned_1gb", lambda: torch.empty(1 << 30, dtype=torch.uint8, pin_memory=True).fill_(1))
    def triton_kernel():
        import triton
        import triton.language as tl
        @triton.jit
        def add_one(x, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(x + offs, tl.load(x + offs, mask=offs < n) + 1, mask=offs < n)
        x = torch.zeros(1 << 20, device="cuda")
        add_one[(x.numel() // 1024,)](x, x.numel(), BLOCK=1024)
        torch.cuda.synchronize()
        assert float(x.sum()) == x.numel()
    step("triton_compile_and_run", triton_kernel)
step("host_half_cap", lambda: torch.ones(cap // 2, dtype=torch.uint8))
step("host_past_cap", lambda: torch.ones(cap + (1 << 30), dtype=torch.uint8))
print(json.dumps(steps))
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--cap-gib", type=int, nargs="+", default=[32, 4])
    args = parser.parse_args()
    found = {}
    for gib in args.cap_gib:
        cap = gib << 30
        try:
            done = subprocess.run(
                ["prlimit", f"--data={cap}", "--", sys.executable, "-c", CHILD, str(cap)],
                capture_output=True,
                text=True,
                timeout=40,  # killed, not left behind on the GPU, if it hangs
            )
        except subprocess.TimeoutExpired:
            found[f"{gib}_gib"] = {"exit": None, "steps": None, "stderr_tail": "timed out after 40 s"}
            continue
        lines = done.stdout.strip().splitlines()
        found[f"{gib}_gib"] = {
            "exit": done.returncode,
            "steps": json.loads(lines[-1]) if lines and lines[-1].startswith("{") else None,
            "stderr_tail": done.stderr[-600:],
        }
    Path(args.out).write_text(json.dumps(found, indent=1))
    print(json.dumps(found, indent=1))


if __name__ == "__main__":
    main()
