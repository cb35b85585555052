"""Class 9 and 11 guardrails: which aten ops and which GPU kernels a model's forward uses.

``OpRecorder`` records aten op families (``aten::mm``) under a TorchDispatchMode, on CPU and GPU alike. A candidate
may use allocation, view and copy ops, plus any family the reference itself calls. On the GPU, ``launched_kernels``
lists what torch.profiler sees a model launch and ``classify_kernel`` sorts each kernel into triton / copy / vendor /
aten / unknown. The kernel census then checks what the dispatch recorder cannot see (kernels replayed from a CUDA
graph captured outside any recorded call, peer cheat p21): vendor and unknown kernels by kind, aten kernels by what
they compute (``aten_kernel_identity``), so a torch op the reference does not call is named however it was launched.
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
        # Say what is allowed where the rule bites: a plain-PyTorch rewrite with other ops is refused too.
        own = ", ".join(sorted(reference.families - LAYOUT_FAMILIES)) or "none beyond memory layout"
        found.append(
            f"class 9 (library calls): candidate calls torch ops the reference does not: {', '.join(extra)}. "
            f"Allowed: the reference's own ops ({own}), ops that only allocate, view or copy, and your own kernels "
            "(Triton); plain PyTorch with other ops is not"
        )
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


class KernelCensus:
    """Names of the GPU kernels, copies and fills launched while it is entered (torch.profiler, all streams), read
    once the device is idle on the way out: a timed call behind the gate is censused around the whole gated call, so
    that nothing inside it synchronises."""

    def __enter__(self) -> "KernelCensus":
        from torch.profiler import ProfilerActivity, profile

        self.names: list[str] = []
        self._profile = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
        self._profile.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        torch.cuda.synchronize()
        self._profile.__exit__(*exc)
        self.names = [e.name for e in self._profile.events() if str(e.device_type).endswith("CUDA")]


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


# Identifiers in a demangled aten kernel name that say nothing about what it computes: C++ types and keywords,
# namespaces, the launch wrappers and the TensorIterator plumbing around the functor. What is left names the
# computation: the functor (MulFunctor, sum_functor, MeanOps) or the function whose lambda it is (tanh_kernel_cuda).
_GENERIC_IDENTIFIERS = frozenset(
    # C++ types, keywords and literal suffixes; torch's dtypes
    "void const volatile unsigned signed int long short char bool float double auto operator lambda unnamed type "
    "true false nullptr this std array size_t int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t "
    "ul ull u l f c10 Half BFloat16 half __half __nv_bfloat16 complex Float8_e4m3fn Float8_e5m2 Float8_e4m3fnuz "
    "Float8_e5m2fnuz OpaqueType Scalar ScalarType opmath_type acc_type "
    # namespaces
    "at native anonymous namespace detail memory policies binary_internal cuda impl legacy internal at_cuda_detail "
    # launch wrappers and iterator plumbing
    "vectorized_elementwise_kernel unrolled_elementwise_kernel elementwise_kernel elementwise_kernel_helper "
    "vectorized_templated_elementwise_kernel unrolled_templated_elementwise_kernel index_elementwise_kernel "
    "gpu_kernel_impl gpu_kernel_impl_nocast gpu_kernel gpu_kernel_nocast gpu_kernel_with_scalars "
    "opmath_gpu_kernel_with_scalars opmath_symmetric_gpu_kernel_with_scalars launch_legacy_kernel "
    "launch_vectorized_kernel launch_unrolled_kernel "
    "reduce_kernel ReduceOp ReduceConfig func_wrapper_t AUnaryFunctor BUnaryFunctor BinaryFunctor TensorIteratorBase "
    "TensorIterator LoadWithoutCast StoreWithoutCast LoadWithCast StoreWithCast OffsetCalculator "
    "TrivialOffsetCalculator IntDivider Array".split()
)
_IDENTIFIER = re.compile(r"(?<![\w])[A-Za-z_]\w*")  # not a number's suffix: the "ul" of "2ul" is no identifier
# One computation under several names: add with a scalar on either side or none; softmax in registers, in shared
# memory or neither, picked by the row's size; layer norm in one vectorized kernel or, for double or unaligned rows,
# moments then normalisation (both seen on the H200).
_SAME_COMPUTATION = (
    (re.compile(r"^CUDAFunctor(?:OnSelf|OnOther)?_add$"), "add"),
    (re.compile(r"^cunn_SoftMaxForward(?:Reg|Smem)$"), "cunn_SoftMaxForward"),
    (
        re.compile(r"^(?:vectorized_layer_norm_kernel|RowwiseMomentsCUDAKernel|LayerNormForwardCUDAKernel)$"),
        "layer_norm",
    ),
)


def aten_kernel_identity(name: str) -> frozenset[str]:
    """What an aten kernel computes: the identifiers of its demangled name that name a computation (its functor or
    kernel function), without numbers, types, namespaces, launch wrappers or iterator plumbing, so the same
    computation at another vector width, unrolled, on strided data or in another float dtype keeps its identity."""
    found = set()
    for identifier in _IDENTIFIER.findall(name):
        if identifier in _GENERIC_IDENTIFIERS:
            continue
        for pattern, same in _SAME_COMPUTATION:
            identifier = pattern.sub(same, identifier)
        found.add(identifier)
    return frozenset(found)


def _beyond(candidate_names, reference_names, triton_kernels: set[str]) -> dict[str, frozenset[str]]:
    known = set().union(*(aten_kernel_identity(n) for n in reference_names))
    found = {}
    for name in candidate_names:
        if classify_kernel(name, triton_kernels) == "aten":
            # an identity of generic parts alone names no computation to judge: such a kernel is allowed
            if extra := aten_kernel_identity(name) - known:
                found[name] = extra
    return found


def aten_kernels_beyond_the_reference(candidate_names, reference_names, triton_kernels: set[str]) -> list[str]:
    """The candidate's aten kernels that compute something none of the reference's kernels does: an identifier of
    its identity that no reference kernel's identity holds. Class 9 on the GPU: a torch op the reference does not
    call, even one replayed from a CUDA graph that no recorded call dispatched (peer cheat p21)."""
    return sorted(_beyond(candidate_names, reference_names, triton_kernels))


def kernel_violations(candidate_names, reference_names, triton_kernels: set[str]) -> list[str]:
    """Class 9 from the kernels a candidate launched: kernels of a kind the reference does not launch (vendor and
    unknown names say little about what they compute), and aten kernels computing what the reference's do not
    (aten_kernels_beyond_the_reference): allowing aten kernels by kind let p21's graph-replayed GELU pass. The route's
    own Triton kernels and copies are allowed."""
    found = []
    reference_classes = {classify_kernel(n, set()) for n in reference_names}
    bad = sorted(
        {
            f"{n[:80]} [{cls}]"
            for n in candidate_names
            if (cls := classify_kernel(n, triton_kernels)) not in {"triton", "copy"} and cls not in reference_classes
        }
    )
    if bad:
        found.append(
            "class 9 (library calls): candidate launched kernels of a kind the reference does not: "
            + "; ".join(bad[:6])
        )
    beyond = _beyond(candidate_names, reference_names, triton_kernels)
    if beyond:
        named = sorted({f"{n[:80]} [{', '.join(sorted(extra))}]" for n, extra in beyond.items()})
        found.append(
            "class 9 (library calls): candidate launched aten kernels the reference does not: " + "; ".join(named[:6])
        )
    return found
