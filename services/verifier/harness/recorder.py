"""Class 9 and 11 guardrails: which aten ops and which GPU kernels a model's forward uses.

``OpRecorder`` records aten op families (``aten::mm``) under a TorchDispatchMode, on CPU and GPU alike. A candidate
may use allocation, view and copy ops, plus any family the reference itself calls. ``kernel_classes`` runs a model
under torch.profiler on the GPU and sorts every launched kernel into triton / copy / vendor / aten / unknown.
"""

import re

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# Ops that allocate, view, move or fill memory: no arithmetic a kernel could hide in. ``set_`` and ``new_empty``
# are what Triton's CPU interpreter uses to hand tensors to its numpy backend.
LAYOUT_FAMILIES = frozenset(
    "aten::" + name
    for name in (
        "empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like new_zeros ones ones_like new_ones "
        "full full_like new_full fill_ zero_ copy_ _to_copy clone view _unsafe_view reshape _reshape_alias as_strided "
        "expand permute transpose t squeeze unsqueeze select slice detach alias lift_fresh lift_fresh_copy resize_ "
        "unbind split narrow set_ _local_scalar_dense scalar_tensor contiguous view_as expand_as"
    ).split()
)
_HOST_TRANSFER_NUMEL = 1024  # host tensors smaller than this (shapes, scalars) are bookkeeping, not computation


def _tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)


class OpRecorder(TorchDispatchMode):
    """Records the aten op families a forward calls and whether it moved device data to the host."""

    def __init__(self, device: torch.device):
        super().__init__()
        self.device = device
        self.families: set[str] = set()
        self.host_ops: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = func._schema.name
        self.families.add(name)
        if self.device.type == "cuda":
            inputs_on_device = any(t.device.type == "cuda" for t in _tensors((args, kwargs)))
            big_host_outputs = any(t.device.type == "cpu" and t.numel() >= _HOST_TRANSFER_NUMEL for t in _tensors(out))
            if inputs_on_device and any(t.device.type == "cpu" for t in _tensors(out)) or big_host_outputs:
                self.host_ops.add(name)
        return out


def op_violations(candidate: OpRecorder, reference: OpRecorder) -> list[str]:
    found = []
    extra = sorted(candidate.families - reference.families - LAYOUT_FAMILIES)
    if extra:
        found.append(f"class 9 (library calls): candidate calls torch ops the reference does not: {', '.join(extra)}")
    if candidate.host_ops:
        found.append(
            "class 11 (computing outside the recorder): candidate moved device data to the host or computed there: "
            + ", ".join(sorted(candidate.host_ops))
        )
    return found


_VENDOR = re.compile(
    r"gemm|gemv|cublas|cutlass|cudnn|nvjet|xmma|cufft|cusparse|cusolver|magma|^sm\d+_|ampere|hopper", re.I
)
_FILL_COPY = re.compile(r"FillFunctor|copy_kernel|CopyKernel|direct_copy|memcpy|memset", re.I)
_ATEN = re.compile(r"at::|at_cuda|native::|elementwise_kernel|reduce_kernel", re.I)


def classify_kernel(name: str, triton_kernels: set[str]) -> str:
    if name.startswith(("Memcpy", "Memset")) or _FILL_COPY.search(name) and _ATEN.search(name):
        return "copy"
    if name in triton_kernels:
        return "triton"
    if _VENDOR.search(name):
        return "vendor"
    if _ATEN.search(name):
        return "aten"
    return "unknown"


def launched_kernels(run) -> list[str]:
    """Names of the GPU kernels, copies and fills ``run()`` launches (torch.profiler, all streams)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    names = []
    for event in prof.events():
        if str(event.device_type).endswith("CUDA"):
            names.append(event.name)
    return names


def _kernel_signature(name: str) -> str:
    """An aten kernel's name without its numbers (vector width, block size, unroll factor): the same computation
    specialised for another alignment or size keeps its signature."""
    return re.sub(r"\d+", "#", name)


def aten_kernels_beyond_the_reference(candidate_names, reference_names, triton_kernels: set[str]) -> list[str]:
    """The candidate's aten kernels whose signature none of the reference's kernels has: a report, not yet a rule
    (kernel_violations allows aten kernels by kind). A library call replayed from a CUDA graph (peer cheat p21) shows
    here where the dispatch recorder cannot see it; what honest routes show here is to be measured before this
    judges anything."""
    known = {_kernel_signature(n) for n in reference_names}
    return sorted(
        {
            n
            for n in candidate_names
            if classify_kernel(n, triton_kernels) == "aten" and _kernel_signature(n) not in known
        }
    )


def kernel_violations(candidate_names, reference_names, triton_kernels: set[str]) -> list[str]:
    reference_classes = {classify_kernel(n, set()) for n in reference_names}
    bad = sorted(
        {
            f"{n[:80]} [{cls}]"
            for n in candidate_names
            if (cls := classify_kernel(n, triton_kernels)) not in {"triton", "copy"} and cls not in reference_classes
        }
    )
    if not bad:
        return []
    return [
        "class 9 (library calls): candidate launched kernels of a kind the reference does not: " + "; ".join(bad[:6])
    ]
