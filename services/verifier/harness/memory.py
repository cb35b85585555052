"""Device memory: each process's peak per problem, and the plan that says before the first problem which problems the
card cannot hold (kernels/problems/memory.py computes each problem's need from its shapes).

The peak is torch's allocator's on the GPU (``torch.cuda.max_memory_allocated``, reset per problem) plus the memory
this process made for the exchange with the other (shared_memory.Region: the output region, the timed inputs), and the
process's peak resident memory on the CPU (VmHWM, reset per problem through /proc/self/clear_refs where the kernel
allows it, else the process's lifetime peak from getrusage).
"""

import contextlib
import os
import resource

import torch

from kernels.problems import memory as problem_memory
from services.verifier.harness import shared_memory

BUDGET_ENV = "KB_MEMORY_BUDGET_MB"  # plan as if the card had this much free (an agent trying a smaller card's fit)


def reset_peak(device: torch.device) -> None:
    shared_memory.reset_peak_made()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return
    with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # resets VmHWM, the peak resident set, to the current resident set


def peak_bytes(device: torch.device) -> int:
    """This process's peak memory since ``reset_peak``."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device)) + shared_memory.peak_made()
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def free_bytes(device: torch.device) -> tuple[int, int]:
    """(free, total) device memory now; on the CPU the host's available and total memory."""
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        return int(free), int(total)
    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    available = pages
    with contextlib.suppress(OSError, ValueError), open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
    return available, pages


def budget_from_env() -> int | None:
    value = os.environ.get(BUDGET_ENV, "")
    return int(value) << 20 if value.isdigit() else None


def plan(problem_ids: list[str], shape: str, device: torch.device, budget: int | None) -> tuple[dict, dict[str, str]]:
    """Each problem's need, and a reason for each that will not fit: the card's free memory (or ``budget``, bytes, where
    one is given) against its need. On the CPU only a given budget refuses anything: the host's memory is the
    machine's, not a card's."""
    needs = problem_memory.plan(problem_ids, shape, gpu=device.type == "cuda")
    free, total = free_bytes(device)
    if budget is None and device.type != "cuda":
        return needs, {}
    if budget is not None:
        free = min(free, budget)
    text = problem_memory.size_text
    budgeted = f" (a budget of {text(budget)} set for this check)" if budget is not None else ""
    refused = {
        pid: (
            f"{pid} not judged on this card: needs about {text(need.total)} of device memory, the card has "
            f"{text(total)} with {text(free)} free{budgeted}"
        )
        for pid, need in needs.items()
        if need.total > free
    }
    return needs, refused
