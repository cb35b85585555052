import torch
import torch.nn.functional as F

from services.verifier.harness.recorder import (
    OpRecorder,
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


def test_aten_kernels_beyond_the_reference_are_reported_by_signature():
    """p21's GELU kernel is an aten kernel like the reference's, which kernel_violations allows by kind; the report
    names it, and not the reference's own kernel at another vector width, nor copies or Triton kernels."""
    mul = "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, MulFunctor<float>>>"
    tanh = "void at::native::vectorized_elementwise_kernel<4, at::native::tanh_kernel_cuda::{lambda(float)#1}>"
    gelu = "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl::{lambda(float)#1}>"
    fill = "void at::native::vectorized_elementwise_kernel<2, at::native::FillFunctor<long>>"
    reference = [mul, tanh]
    candidate = [mul.replace("<4,", "<2,"), gelu, fill, "_gelu_kernel"]
    assert kernel_violations(candidate, reference, {"_gelu_kernel"}) == []  # allowed by kind today
    assert aten_kernels_beyond_the_reference(candidate, reference, {"_gelu_kernel"}) == [gelu]
    # a route's own Triton kernel whose name looks like torch's is the route's, not a library call
    assert aten_kernels_beyond_the_reference(["_sum_reduce_kernel"], reference, {"_sum_reduce_kernel"}) == []


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
