"""Where a full check's wall goes outside the timed calls (issue 13, item 7: 40 s): on the GPU, each step the judge or
the candidate repeats per problem or per check, timed alone in one process -- CUDA's start, pinning the shared output
buffer, an output crossing the buffer both ways, a timed call's input draw (draws.draw + into_slot), the L2 flush.

usage: python3 bench/harness/wall_probe.py OUT.json [--problems ID ...]
"""

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from kernels import problems as registry  # noqa: E402
from services.verifier.harness import draws  # noqa: E402
from services.verifier.harness.channel import SharedBuffer  # noqa: E402
from services.verifier.harness.device import GpuKit  # noqa: E402


def timed(run, repeat: int = 1) -> float:
    """Median ms of ``run`` over ``repeat`` tries, device drained around each."""
    took = []
    for _ in range(repeat):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        run()
        torch.cuda.synchronize()
        took.append((time.perf_counter() - t0) * 1e3)
    return sorted(took)[len(took) // 2]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--problems", nargs="*", default=None)
    args = parser.parse_args()
    result: dict = {}
    t0 = time.perf_counter()
    torch.cuda.init()
    torch.empty(1, device="cuda")
    result["cuda_start_ms"] = (time.perf_counter() - t0) * 1e3
    device = torch.device("cuda")
    kit = GpuKit(device, l2_flush=True)
    result["flush_ms"] = timed(kit.prepare_run, 20)

    problems = args.problems or list(registry.PROBLEM_IDS)
    per_problem = {}
    largest = 0
    for problem_id in problems:
        problem = registry.load(problem_id)
        slots: dict = {}
        draws.into_slot(slots, 0, draws.draw(problem, problem_id, "full", device, 1, True))
        row = {
            "draw_ms": timed(lambda p=problem, i=problem_id: draws.draw(p, i, "full", device, 2, True), 5),
            "draw_into_slot_ms": timed(
                lambda p=problem, i=problem_id, held=slots: draws.into_slot(
                    held, 0, draws.draw(p, i, "full", device, 3, True)
                ),
                5,
            ),
        }
        model = problem.Model(*problem.get_init_inputs("full")).to(device).eval()
        with torch.no_grad():
            out = model(*slots[0])
        row["output_bytes"] = out.numel() * out.element_size()
        largest = max(largest, row["output_bytes"])
        per_problem[problem_id] = row
        del slots, model, out
        torch.cuda.empty_cache()
    result["problems"] = per_problem

    fd = SharedBuffer.new_fd()
    t0 = time.perf_counter()
    shared = SharedBuffer.sized(fd, largest)
    result["shared_bytes"] = shared.size
    result["size_ms"] = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    flat = shared.tensor()
    result["pin_ms"] = (time.perf_counter() - t0) * 1e3
    result["pinned"] = shared.pinned
    on_device = torch.empty(largest, dtype=torch.uint8, device=device)
    result["copy_out_ms"] = timed(lambda: flat[:largest].copy_(on_device), 3)
    result["copy_in_ms"] = timed(lambda: on_device.copy_(flat[:largest]), 3)
    small = 256 << 20
    small_shared = SharedBuffer.sized(SharedBuffer.new_fd(), small)
    t0 = time.perf_counter()
    flat2 = small_shared.tensor()
    result["pin_256mb_ms"] = (time.perf_counter() - t0) * 1e3
    result["copy_out_chunked_256mb_ms"] = timed(
        lambda: [flat2.copy_(on_device[s : s + small]) for s in range(0, largest - small + 1, small)], 3
    )
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
