"""Where a full check's wall goes outside the timed calls (issue 13, item 7: 40 s): on the GPU, each step the judge or
the candidate repeats per problem or per check, timed alone in one process -- CUDA's start, the L2 flush, a timed
call's input draw (fresh, fresh and copied into a slot as before 2a108d6, in place into a slot and into shared device
memory as now), making the output region and an output crossing it both ways (candidate's copy in, judge's copy out).

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
from services.verifier.harness.device import GpuKit  # noqa: E402
from services.verifier.harness.shared_memory import Region, flat_places, layout  # noqa: E402


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
        held = draws.into_slot(slots, 0, problem, problem_id, "full", device, 1)
        region = Region.create(layout(held), device)

        def then_copy(p=problem, i=problem_id, into=held):  # the slot's draw before 2a108d6
            for target, source in zip(into, draws.draw(p, i, "full", device, 3, True), strict=True):
                target.copy_(source)

        row = {
            "draw_ms": timed(lambda p=problem, i=problem_id: draws.draw(p, i, "full", device, 2, True), 5),
            "draw_then_copy_ms": timed(then_copy, 5),
            "draw_in_place_ms": timed(
                lambda p=problem, i=problem_id, s=slots: draws.into_slot(s, 0, p, i, "full", device, 4), 5
            ),
            "draw_into_region_ms": timed(
                lambda p=problem, i=problem_id, r=region: draws.draw(p, i, "full", device, 5, True, into=r.tensors), 5
            ),
        }
        model = problem.Model(*problem.get_init_inputs("full")).to(device).eval()
        with torch.no_grad():
            out = model(*slots[0])
        row["output_bytes"] = out.numel() * out.element_size()
        largest = max(largest, row["output_bytes"])
        per_problem[problem_id] = row
        region.close()
        del slots, held, model, out
        torch.cuda.empty_cache()
    result["problems"] = per_problem

    t0 = time.perf_counter()
    outputs = Region.create(flat_places(largest), device)
    result["output_region_bytes"] = outputs.size
    result["output_region_create_ms"] = (time.perf_counter() - t0) * 1e3
    memory = outputs.tensors[0]
    produced = torch.empty(largest, dtype=torch.uint8, device=device)
    judged = torch.empty(largest, dtype=torch.uint8, device=device)
    result["candidate_copy_in_ms"] = timed(lambda: memory[:largest].copy_(produced), 3)
    result["judge_copy_out_ms"] = timed(lambda: judged.copy_(memory[:largest]), 3)
    outputs.close()
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
