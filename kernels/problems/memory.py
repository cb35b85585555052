"""How much device memory judging one problem holds at once, computed from its shapes (on torch's meta device: no
memory, no kernel) and what the problem declares of its reference (``FORWARD_TEMPORARIES``, ``ORACLE_SLICES``): the
verifier's memory plan, made before a check's first problem (docs/verifier-harness.md, "The memory plan").
``python -m kernels.problems.memory [--shape full]`` prints each problem's need as a Markdown table.

A check judges one problem at a time, in two processes on one card. With I the bytes of one draw of the inputs, L its
largest input, O the output, T the reference's temporaries and R the output region (the check's largest output):

- correctness: the judge holds the inputs, the reference's output, its copy of the candidate's and the output region
  (I + R + max(T·L + O, 2·O)); the candidate its inputs, their pristine copy, its output and the two freed blocks it
  poisons (2·I + 2·O);
- timing: the judge holds the two timed slots' inputs, the output region, its copy of the call's output, and for a
  re-check the inputs drawn again, the reference's output and on a precision sample the float64 oracle one slice at a
  time (3·I + R + max(T·L + O, 2·O + slice)); the candidate its output (O).

The need is the larger phase's sum, plus the CUDA contexts and the L2 flush's buffer. What a route allocates beyond
its output is the route's own, and not in the plan (its allocator is held to KB_GPU_MEMORY_FRACTION of the card).
"""

import argparse
from dataclasses import dataclass

import torch

from kernels import problems

GIB = 1 << 30
CONTEXTS_BYTES = 2 * GIB  # two CUDA contexts (the judge's, the candidate's), the L2 flush's buffer, workspaces
ORACLE_SLICE_BYTES = GIB  # the most one slice of the float64 oracle holds on the device


@dataclass(frozen=True)
class Sizes:
    inputs: int  # bytes of one draw of every input
    largest_input: int
    output: int


@dataclass(frozen=True)
class Need:
    problem_id: str
    judge: int  # the judge's peak, bytes
    candidate: int  # the candidate process's peak, bytes
    total: int  # both at once in the phase that needs most, and the contexts: what the card must have free


def _bytes(tensor) -> int:
    return tensor.numel() * tensor.element_size() if isinstance(tensor, torch.Tensor) else 0


def sizes(problem_id: str, shape: str = "full") -> Sizes:
    """One draw's inputs and the reference's output, from the shapes alone (meta tensors)."""
    problem = problems.load(problem_id)
    inputs = problem.get_inputs(shape, device="meta")
    model = problem.Model(*problem.get_init_inputs(shape)).to("meta")
    with torch.no_grad():
        output = model(*inputs)
    found = [_bytes(t) for t in inputs]
    return Sizes(sum(found), max(found, default=0), _bytes(output))


def need(problem_id: str, shape: str = "full", output_region: int | None = None, gpu: bool = True) -> Need:
    """The problem's need; ``output_region``: the check's largest output (the region every problem's outputs cross),
    this problem's own by default; ``gpu``: count the CUDA contexts."""
    problem = problems.load(problem_id)
    size = sizes(problem_id, shape)
    i, largest, o = size.inputs, size.largest_input, size.output
    r = max(output_region or 0, o)
    forward = problem.FORWARD_TEMPORARIES * largest + o
    # Sliced, the oracle's float64 copies hold at most a slice; unsliced it runs where it fits, on the host if need be.
    oracle_slice = min(ORACLE_SLICE_BYTES, 2 * (i + forward)) if problem.ORACLE_SLICES is not None else 0
    judge_correctness = i + r + max(forward, 2 * o)
    candidate_correctness = 2 * i + 2 * o
    judge_timing = 3 * i + r + max(forward, 2 * o + oracle_slice)
    candidate_timing = o
    total = max(judge_correctness + candidate_correctness, judge_timing + candidate_timing)
    return Need(
        problem_id,
        judge=max(judge_correctness, judge_timing),
        candidate=max(candidate_correctness, candidate_timing),
        total=total + (CONTEXTS_BYTES if gpu else 0),
    )


def plan(problem_ids, shape: str = "full", gpu: bool = True) -> dict[str, Need]:
    """Every problem's need in one check: the output region is the check's largest output."""
    region = max((sizes(pid, shape).output for pid in problem_ids), default=0)
    return {pid: need(pid, shape, region, gpu) for pid in problem_ids}


def size_text(nbytes: int) -> str:
    """Bytes as a person reads them: "78 GiB", "7.5 GiB", "12 MiB"."""
    for unit, step in (("GiB", GIB), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= step:
            value = nbytes / step
            return f"{value:.0f} {unit}" if value >= 10 else f"{value:.1f} {unit}"
    return f"{nbytes} bytes"


def table(shape: str = "full") -> str:
    rows = ["| problem | judge | candidate | the card must have free |", "|---|---:|---:|---:|"]
    for pid, found in plan(problems.PROBLEM_IDS, shape).items():
        rows.append(f"| {pid} | {size_text(found.judge)} | {size_text(found.candidate)} | {size_text(found.total)} |")
    return "\n".join(rows)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m kernels.problems.memory", description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="full", choices=("full", "smoke"))
    print(table(parser.parse_args().shape))
