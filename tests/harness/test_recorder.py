import torch
import torch.nn.functional as F

from services.verifier.harness.recorder import (
    OpRecorder,
    aten_kernel_identity,
    aten_kernels_beyond_the_reference,
    classify_kernel,
    kernel_violations,
    op_violations,
)


def test_kernel_names_are_classified():
    triton = {"new_gelu_kernel"}
    assert classify_kernel("new_gelu_kernel", triton) == "triton"
    assert classify_kernel("Memcpy DtoD (Device -> Device)", triton) == "copy"
    assert classify_kernel("Memset (Device)", triton) == "copy"
    assert (
        classify_kernel("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", triton)
        == "copy"
    )
    assert classify_kernel("nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NNT", triton) == "vendor"
    assert classify_kernel("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32", triton) == "vendor"
    assert (
        classify_kernel("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x128_8x4_nn_align1>(Params)", triton)
        == "vendor"
    )
    assert classify_kernel("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>", triton) == "aten"
    assert classify_kernel("some_kernel_of_unknown_origin", triton) == "unknown"


def test_kernel_violations_allow_only_what_the_reference_launches():
    reference = ["void at::native::reduce_kernel<512, 1>"]
    assert kernel_violations(["my_sum_kernel", "Memset (Device)"], reference, {"my_sum_kernel"}) == []
    found = kernel_violations(["sm90_xmma_gemm_f32f32"], reference, set())
    assert found and found[0].startswith("class 9 (library calls)") and "vendor" in found[0]
    assert kernel_violations(["sm90_xmma_gemm_f32f32"], ["nvjet_sm90_tst"], set()) == []


# Demangled aten kernel names as torch.profiler reports them (the vectorized, nocast, reduce, layer-norm and GELU
# forms as seen on the H200, bench/harness/isolation/run9; the unrolled form is torch's launcher's own).
def _vectorized(width: int, functor: str, arrays: int = 2) -> str:
    tail = f"std::array<char*, {arrays}ul>"
    return f"void at::native::vectorized_elementwise_kernel<{width}, {functor}, {tail} >(int, {functor}, {tail})"


def _unrolled(functor: str) -> str:
    rest = (
        "std::array<char*, 2ul>, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, "
        "at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1>"
    )
    return f"void at::native::unrolled_elementwise_kernel<{functor}, {rest} >(int, {functor}, {rest})"


def _strided(block: int, unroll: int, functor: str) -> str:
    space = " " if functor.endswith(">") else ""
    impl = f"at::native::gpu_kernel_impl_nocast<{functor}{space}>(at::TensorIteratorBase&, {functor} const&)"
    kernel = f"{impl}::{{lambda(int)#1}}"
    return f"void at::native::elementwise_kernel<{block}, {unroll}, {kernel}>(int, {kernel})"


def _unary(function: str, dtype: str = "float", inner: int = 2) -> str:
    return (
        f"at::native::{function}(at::TensorIteratorBase&)::{{lambda()#2}}::operator()() const::{{lambda()#{inner}}}"
        f"::operator()() const::{{lambda({dtype})#1}}"
    )


def _sum(block: int, vt: int, dtype: str = "float") -> str:
    op = (
        f"at::native::ReduceOp<{dtype}, at::native::func_wrapper_t<{dtype}, at::native::sum_functor<{dtype}, {dtype}, "
        f"{dtype}>::operator()(at::TensorIterator&)::{{lambda({dtype}, {dtype})#1}}>, unsigned int, {dtype}, 4, 4>"
    )
    return f"void at::native::reduce_kernel<{block}, {vt}, {op} >({op})"


def _binary(functor: str, dtype: str = "float", wrapper: str = "BinaryFunctor") -> str:
    return f"at::native::{wrapper}<{dtype}, {dtype}, {dtype}, at::native::binary_internal::{functor}<{dtype}> >"


GELU = _vectorized(
    4,
    "at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#1}::operator()() const"
    "::{lambda()#2}::operator()() const::{lambda(float)#1}",
)
TANH = _vectorized(4, _unary("tanh_kernel_cuda"))
POW = _vectorized(
    4,
    "at::native::(anonymous namespace)::pow_tensor_scalar_kernel_impl<float, float>(at::TensorIteratorBase&, float)"
    "::{lambda(float)#2}",
)
# new_gelu's reference on the H200: 0.5 * x * (1 + tanh(c * (x + 0.044715 * x**3)))
NEW_GELU_REFERENCE = [
    POW,
    _vectorized(4, _binary("MulFunctor", wrapper="AUnaryFunctor")),
    _vectorized(4, _binary("MulFunctor"), 3),
    _vectorized(4, "at::native::CUDAFunctorOnSelf_add<float>"),
    _vectorized(4, "at::native::CUDAFunctor_add<float>", 3),
    TANH,
]
FILL = _vectorized(2, "at::native::FillFunctor<long>", 1)


def test_an_aten_kernel_is_identified_by_what_it_computes():
    """Vector width, unrolling, strided launch, block size and float dtype leave the identity alone; only what names a
    computation is kept."""
    identity = aten_kernel_identity
    assert identity(GELU) == {"GeluCUDAKernelImpl", "GeluType"}
    tanh_double = _vectorized(2, _unary("tanh_kernel_cuda", "double", inner=1))
    tanh_half = _vectorized(8, _unary("tanh_kernel_cuda", "c10::Half", inner=3))
    for tanh in (
        TANH,
        tanh_double,
        tanh_half,
        _unrolled(_unary("tanh_kernel_cuda")),
        _strided(128, 4, _unary("tanh_kernel_cuda")),
    ):
        assert identity(tanh) == {"tanh_kernel_cuda"}, tanh
    assert identity(POW) == {"pow_tensor_scalar_kernel_impl"}
    assert identity(_vectorized(4, _binary("MulFunctor"), 3)) == {"MulFunctor"}
    assert identity(_vectorized(4, _binary("MulFunctor", wrapper="AUnaryFunctor"))) == {"MulFunctor"}
    assert identity(_strided(128, 2, _binary("DivFunctor", "double"))) == {"DivFunctor"}
    for add in ("CUDAFunctorOnSelf_add<float>", "CUDAFunctorOnOther_add<double>", "CUDAFunctor_add<c10::BFloat16>"):
        assert identity(_vectorized(4, "at::native::" + add)) == {"add"}
    assert identity(_sum(512, 1)) == identity(_sum(128, 4)) == identity(_sum(512, 1, "double")) == {"sum_functor"}
    softmax = (
        "void at::native::(anonymous namespace)::cunn_SoftMaxForward{}<4, float, float, float, "
        "at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(float*, float const*, int)"
    )
    assert (
        identity(softmax.format(""))
        == identity(softmax.format("Reg"))
        == {"cunn_SoftMaxForward", "LogSoftMaxForwardEpilogue"}
    )
    layer_norm_float = (
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float, false>(int, float, "
        "float const*, float const*, float const*, float*, float*, float*)"
    )
    moments_double = (
        "void at::native::(anonymous namespace)::RowwiseMomentsCUDAKernel<double, double, false>(long, double, "
        "double const*, double*, double*)"
    )
    assert identity(layer_norm_float) == identity(moments_double) == {"layer_norm"}
    assert identity("void at::native::reduce_kernel<512, 1>") == frozenset()  # generic parts only


def test_p21_a_gelu_replayed_from_a_cuda_graph_is_class_9():
    """p21's kernels on the H200 (bench/harness/isolation/runs.md, run9): torch's fused GELU replayed from a graph,
    which no recorded call dispatched, and a copy. new_gelu's reference launches aten kernels too, so a rule by kind
    allowed it; by what it computes, the GELU is none of the reference's."""
    candidate = ["Memcpy DtoD (Device -> Device)", GELU]
    assert aten_kernels_beyond_the_reference(candidate, NEW_GELU_REFERENCE, set()) == [GELU]
    found = kernel_violations(candidate, NEW_GELU_REFERENCE, set())
    assert len(found) == 1
    assert found[0].startswith("class 9 (library calls): candidate launched aten kernels the reference does not: ")
    assert "GeluCUDAKernelImpl" in found[0]
    # the exact GELU (approximate="none") is named as well: another lambda of the same kernel function
    assert kernel_violations([GELU.replace("{lambda()#1}", "{lambda()#2}")], NEW_GELU_REFERENCE, set())


def test_the_references_own_computations_are_allowed_in_any_variant():
    """A candidate running the reference's ops eagerly, at another vector width, unrolled, strided or in double, and
    a reduction at another block size, computes nothing the reference does not."""
    for candidate in (
        NEW_GELU_REFERENCE,
        [
            _vectorized(2, _unary("tanh_kernel_cuda", "double", inner=1)),
            _unrolled(_unary("tanh_kernel_cuda")),
            _strided(128, 4, _unary("tanh_kernel_cuda")),
            _vectorized(2, _binary("MulFunctor", "double"), 3),
            _strided(128, 2, _binary("MulFunctor", wrapper="AUnaryFunctor")),
            _vectorized(4, "at::native::CUDAFunctorOnOther_add<float>"),
        ],
    ):
        assert kernel_violations(candidate, NEW_GELU_REFERENCE, set()) == []
        assert aten_kernels_beyond_the_reference(candidate, NEW_GELU_REFERENCE, set()) == []
    assert kernel_violations([_sum(128, 4), _sum(512, 1, "double")], [_sum(512, 1)], set()) == []
    # a computation the reference does not make is named, whatever wraps it
    assert kernel_violations([_sum(512, 1)], NEW_GELU_REFERENCE, set())[0].startswith("class 9")
    assert aten_kernels_beyond_the_reference([_vectorized(4, _binary("DivFunctor"), 3)], NEW_GELU_REFERENCE, set())


def test_an_honest_triton_route_and_its_copies_are_allowed():
    candidate = ["_gelu_kernel", "Memcpy DtoD (Device -> Device)", "Memset (Device)", FILL]
    assert kernel_violations(candidate, NEW_GELU_REFERENCE, {"_gelu_kernel"}) == []
    assert aten_kernels_beyond_the_reference(candidate, NEW_GELU_REFERENCE, {"_gelu_kernel"}) == []
    # a route's own Triton kernel whose name looks like torch's is the route's, not a library call
    assert aten_kernels_beyond_the_reference(["_sum_reduce_kernel"], NEW_GELU_REFERENCE, {"_sum_reduce_kernel"}) == []


def test_an_aten_kernel_of_generic_parts_alone_cannot_be_judged():
    """Where the reference launches aten kernels, one whose name names no computation is allowed; where it launches
    none, the kind rule still names it."""
    plain = "void at::native::reduce_kernel<512, 1>"
    assert kernel_violations([plain], NEW_GELU_REFERENCE, set()) == []
    found = kernel_violations([plain], ["nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NNT"], set())
    assert found and "of a kind the reference does not" in found[0] and "[aten]" in found[0]


def _record(fn, *args):
    recorder = OpRecorder(torch.device("cpu"))
    with recorder:
        fn(*args)
    return recorder


def test_op_families_beyond_the_reference_are_class_9():
    x = torch.rand(4, 8)
    reference = _record(lambda t: torch.sum(t, dim=1, keepdim=True), x)
    layout_only = _record(lambda t: torch.empty_like(t).copy_(t).view(-1).clone(), x)
    library = _record(lambda t: torch.ones(1, 4).matmul(t), x)
    assert "aten::sum" in reference.families
    assert op_violations(layout_only, reference) == []
    found = op_violations(library, reference)
    assert found and found[0].startswith("class 9") and "aten::mm" in found[0]
    assert op_violations(_record(lambda t: F.gelu(t), x), reference)[0].startswith("class 9")
