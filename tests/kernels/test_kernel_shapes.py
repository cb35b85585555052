"""Awkward shapes (one row, one element, non-powers of two, ragged tails, rows longer than one block) and the
invariants each operator must keep. Interpreter block sizes are small (32-256), so a few hundred elements already
span several blocks."""

import importlib
import math

import pytest
import torch
import torch.nn.functional as F


def load_route(problem_id: str):
    """The route module, decorated under the interpreter (reloaded if an earlier import decorated it without)."""
    module = importlib.import_module(f"kernels.triton.{problem_id}")
    if not module._INTERPRET:
        module = importlib.reload(module)
    return module


def load_problem(problem_id: str):
    return importlib.import_module(f"kernels.problems.{problem_id}")


def _run(problem_id: str, *inputs, init=None):
    problem = load_problem(problem_id)
    init = problem.get_init_inputs("smoke") if init is None else init
    with torch.no_grad():
        return load_route(problem_id).ModelNew(*init)(*inputs), problem.Model(*init)(*inputs)


def _close(out, expected, rtol=1e-5, atol=1e-5):
    assert out.shape == expected.shape
    torch.testing.assert_close(out, expected, rtol=rtol, atol=atol)


@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (3, 1027), (2, 300)])
def test_new_gelu_shapes_and_odd_part(shape, gen):
    x = (torch.rand(shape, generator=gen) - 0.5) * 20  # both signs, well into both tails
    out, expected = _run("new_gelu", x)
    _close(out, expected)
    minus, _ = _run("new_gelu", -x)
    # gelu(x) - gelu(-x) = x, since 0.5 (1 + tanh u) + 0.5 (1 + tanh(-u)) = 1
    torch.testing.assert_close(out - minus, x, rtol=1e-6, atol=1e-5)


def test_new_gelu_is_monotonic_for_positive_inputs(gen):
    x, _ = torch.sort(torch.rand(2000, generator=gen) * 6)
    out, _ = _run("new_gelu", x.reshape(1, -1))
    assert (out.reshape(-1).diff() >= 0).all()


@pytest.mark.parametrize(
    "variant",
    [
        "interpret",
        "interpret_coop",
        "interpret_coop_lookahead",
        "interpret_hold",
        "interpret_hold_prefetch",
        "interpret_coop_prefetch",
    ],
)
@pytest.mark.parametrize("shape", [(1, 1), (1, 300), (4, 1025), (7, 64), (5, 1024)])
def test_log_softmax_rows_logsumexp_to_zero(shape, variant, gen):
    x = torch.randn(shape, generator=gen) * 30  # large spread: the max subtraction matters
    route = load_route("log_softmax")
    if route.programs_per_row(route.VARIANTS[variant], shape[1]) > 1:
        pytest.skip("programs that wait for each other cannot run one after another in the interpreter")
    model = route.ModelNew(1)
    model.variant = variant
    with torch.no_grad():
        out = model(x)
    _close(out, torch.log_softmax(x, dim=1), rtol=1e-5, atol=1e-4)
    lse = torch.logsumexp(out.double(), dim=1)
    torch.testing.assert_close(lse, torch.zeros_like(lse), rtol=0, atol=1e-5)


def test_log_softmax_hold_falls_back_when_a_row_does_not_fit(gen):
    """A row needing more programs than fit at once (5 slices, room for 2 in the interpreter) goes through L2."""
    x = torch.randn(3, 5000, generator=gen)
    model = load_route("log_softmax").ModelNew(1)
    model.variant = "interpret_hold"
    with torch.no_grad():
        _close(model(x), torch.log_softmax(x, dim=1), rtol=1e-5, atol=1e-4)


def test_log_softmax_rejects_other_dims():
    model = load_route("log_softmax").ModelNew(0)
    with pytest.raises(ValueError, match="dim 1"):
        model(torch.rand(3, 4))


@pytest.mark.parametrize("shape", [(1, 1, 1), (2, 13, 3, 5), (1, 8, 17), (3, 7, 5, 9)])
def test_rms_norm_shapes(shape, gen):
    x = torch.randn(shape, generator=gen)
    out, expected = _run("rms_norm", x, init=[shape[1], 1e-5])
    _close(out, expected)
    # each normalised position has mean square 1 (up to eps)
    ms = (out.double() ** 2).mean(dim=1)
    big = (x.double() ** 2).mean(dim=1) > 1e-2
    torch.testing.assert_close(ms[big], torch.ones_like(ms[big]), rtol=1e-3, atol=0)


@pytest.mark.parametrize("variant", ["interpret", "interpret_hold", "interpret_l2", "interpret_fused"])
@pytest.mark.parametrize(
    "x_shape,normalized", [((3, 5, 7), (5, 7)), ((2, 600), (600,)), ((1, 1), (1,)), ((4, 2, 129), (2, 129))]
)
def test_layer_norm_shapes(x_shape, normalized, variant, gen):
    x = torch.randn(x_shape, generator=gen) * 3 + 5
    problem = load_problem("layer_norm")
    ref = problem.Model(normalized)
    ours = load_route("layer_norm").ModelNew(normalized)
    ours.variant = variant
    with torch.no_grad():
        out_default = ours(x)
        ref.ln.weight.copy_(torch.randn(normalized, generator=gen))
        ref.ln.bias.copy_(torch.randn(normalized, generator=gen))
        ours.load_state_dict(ref.state_dict(), strict=True)
        _close(ours(x), ref(x), rtol=1e-4, atol=1e-4)
    if math.prod(normalized) > 1:  # weight 1, bias 0: every row has mean 0 and variance 1
        rows = out_default.double().reshape(-1, math.prod(normalized))
        torch.testing.assert_close(rows.mean(dim=1), torch.zeros(rows.shape[0], dtype=torch.float64), atol=1e-5, rtol=0)
        torch.testing.assert_close(
            rows.var(dim=1, unbiased=False), torch.ones(rows.shape[0], dtype=torch.float64), atol=1e-3, rtol=0
        )


@pytest.mark.parametrize("rows,programs", [(16, 33), (16, 528), (5, 7), (3, 2), (1, 4), (40, 528)])
def test_layer_norm_fused_program_count(rows, programs):
    """At most the slots (all programs meet), at most the items; a multiple of rows when that keeps 7/8 of them."""
    route = load_route("layer_norm")
    got = route._fused_programs(rows, 10_000, programs)
    assert 1 <= got <= programs
    if rows <= programs and programs // rows * rows * 8 >= programs * 7:
        assert got % rows == 0
    else:
        assert got == programs


def test_layer_norm_fused_walks_several_items_per_program(gen):
    """More (chunk, row) items than programs, a ragged last chunk, and an L2-tail longer than some rows: pass 2
    must merge the moments of each row it meets, whichever row a program starts on."""
    route = load_route("layer_norm")
    x = torch.randn(7, 3, 50, generator=gen) * 2 + 1
    w, b = torch.randn(3, 50, generator=gen), torch.randn(3, 50, generator=gen)
    for name in ("interpret_fused", "fused_c4096_w8_p4_k24"):  # a GPU config runs as one program here
        y = torch.empty_like(x)
        route._launch_fused(x, w, b, y, 7, 150, 1e-5, {**route.VARIANTS[name], "keep_mb": 1})
        _close(y, F.layer_norm(x, (3, 50), w, b, 1e-5), rtol=1e-4, atol=1e-4)


def test_layer_norm_hold_falls_back_when_a_row_does_not_fit(gen):
    """A row needing more programs than fit at once (2 slices, room for 1 in the interpreter): the two passes."""
    x = torch.randn(3, 2000, generator=gen)
    ours = load_route("layer_norm").ModelNew((2000,))
    ours.variant = "interpret_hold"
    with torch.no_grad():
        _close(ours(x), load_problem("layer_norm").Model((2000,))(x), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 70, 5), (2, 40, 9)])
def test_sum_dim_shapes(shape, dim, gen):
    x = torch.randn(shape, generator=gen)
    out, expected = _run("sum_dim", x, init=[dim])
    _close(out, expected, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("shape,dim", [((1, 1), 1), ((3, 200), 1), ((2, 1000), 1), ((50, 3), 0), ((2, 65, 3), 1)])
def test_cumsum_reverse_shapes_and_ends(shape, dim, gen):
    x = torch.randn(shape, generator=gen)
    out, expected = _run("cumsum_reverse", x, init=[dim])
    _close(out, expected, rtol=1e-5, atol=1e-4)
    # the first position holds the whole sum along dim, the last one only the last element
    torch.testing.assert_close(out.select(dim, 0), x.sum(dim=dim), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(out.select(dim, -1), x.select(dim, -1))


@pytest.mark.parametrize("shape", [(1, 1), (7, 45), (5, 100), (3, 257), (11, 32)])
@pytest.mark.parametrize("variant", ["interpret", "interpret_persistent"])
def test_cross_entropy_shapes(shape, variant, gen):
    """interpret_persistent: 3 programs walking bands of 2 rows, one 32-class tile a row when it fits (11 x 32)."""
    x = torch.randn(shape, generator=gen) * 50  # large logits: log-sum-exp must subtract the max
    t = torch.randint(0, shape[1], (shape[0],), generator=gen)
    out = load_route("cross_entropy").cross_entropy(x, t, variant)
    _close(out, F.cross_entropy(x, t), rtol=1e-5, atol=1e-4)


def test_cross_entropy_ignores_ignore_index(gen):
    x = torch.randn(6, 40, generator=gen)
    t = torch.tensor([1, -100, 3, 39, -100, 0])
    out, _ = _run("cross_entropy", x, t)
    _close(out, F.cross_entropy(x, t))


@pytest.mark.parametrize("shape", [(1, 1), (7, 13), (3, 300)])
def test_huber_loss_both_branches(shape, gen):
    p = torch.randn(shape, generator=gen) * 3  # |d| on both sides of beta = 1
    t = torch.randn(shape, generator=gen)
    out, expected = _run("huber_loss", p, t)
    _close(out, expected)


@pytest.mark.parametrize("shape", [(1, 5), (3, 257), (16, 130)])
def test_kl_div_shapes_and_zero_targets(shape, gen):
    p = torch.rand(shape, generator=gen).softmax(-1)
    t = torch.rand(shape, generator=gen)
    t[..., ::3] = 0.0  # xlogy: a zero target adds nothing
    t = t / t.sum(-1, keepdim=True)
    out, expected = _run("kl_div", p, t)
    _close(out, expected)


@pytest.mark.parametrize("shape", [(1, 1), (5, 100), (20, 72)])
@pytest.mark.parametrize("margin", [1.0, 0.25])
def test_triplet_margin_loss_shapes(shape, margin, gen):
    a, p, n = (torch.randn(shape, generator=gen) for _ in range(3))
    out, expected = _run("triplet_margin_loss", a, p, n, init=[margin])
    _close(out, expected)


@pytest.mark.parametrize("n", [1, 45, 70])
def test_hinge_loss_shapes(n, gen):
    p = torch.randn(n, n, generator=gen)
    t = torch.randint(0, 2, (n,), generator=gen).float() * 2 - 1
    out, expected = _run("hinge_loss", p, t)
    _close(out, expected)


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (2, 3, 5), (33, 70, 129), (64, 16, 32)])
def test_matmul_shapes_are_fp32_accurate(m, k, n, gen):
    a = torch.randn(m, k, generator=gen)
    b = torch.randn(k, n, generator=gen)
    out, expected = _run("matmul", a, b)
    oracle = a.double() @ b.double()
    err = ((out.double() - oracle).norm() / oracle.norm()).item()
    ref_err = ((expected.double() - oracle).norm() / oracle.norm()).item()
    assert err <= max(2 * ref_err, 2.0**-22), f"3xTF32 error {err:.3g} against fp32's {ref_err:.3g}"


def test_matmul_split_is_exact_in_tf32(gen):
    """hi keeps 10 mantissa bits (the low 13 are zero), lo likewise, and hi + lo recovers x to 2^-22."""
    route = load_route("matmul")
    x = torch.randn(1000, generator=gen) * torch.logspace(-20, 20, 1000)
    hi, lo = torch.empty_like(x), torch.empty_like(x)
    route._split_tf32[(1,)](x, hi, lo, x.numel(), BLOCK=1024)
    low_bits = 0x1FFF
    assert ((hi.view(torch.int32) & low_bits) == 0).all()
    assert ((lo.view(torch.int32) & low_bits) == 0).all()
    rel = ((hi.double() + lo.double() - x.double()).abs() / x.double().abs()).max().item()
    assert rel <= 2.0**-22


def test_matmul_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="cannot multiply"):
        load_route("matmul").ModelNew()(torch.rand(3, 4), torch.rand(5, 6))


@pytest.mark.parametrize("variant", ["interpret_one_dot", "interpret_one_dot_tma"])
@pytest.mark.parametrize("m,k,n", [(33, 20, 44), (1, 1, 1), (64, 64, 64), (17, 7, 9)])
def test_matmul_one_dot_paths(m, k, n, variant, gen):
    """One dot per step over the halves (the shipped GPU config's path: TMA loads, one flush a K tile; or pointer
    loads, a flush every two); ragged K tiles, K not a multiple of 4 (no descriptor: the pointer kernel)."""
    a = torch.randn(m, k, generator=gen)
    b = torch.randn(k, n, generator=gen)
    out = load_route("matmul").matmul_3xtf32(a, b, variant)
    oracle = a.double() @ b.double()
    ref_err = (((a @ b).double() - oracle).norm() / oracle.norm()).item()
    err = ((out.double() - oracle).norm() / oracle.norm()).item()
    assert err <= max(2 * ref_err, 2.0**-22), f"3xTF32 error {err:.3g} against fp32's {ref_err:.3g}"


@pytest.mark.parametrize("m,k,n", [(33, 20, 44), (70, 36, 8), (100, 4, 65), (17, 7, 9)])
def test_matmul_tma_persistent_path_at_edge_tiles(m, k, n, gen):
    """The TMA-descriptor kernel on a persistent grid (4 programs walking partial tiles at every edge); K or N not a
    multiple of 4 cannot have a descriptor and takes the pointer kernel."""
    route = load_route("matmul")
    a = torch.randn(m, k, generator=gen)
    b = torch.randn(k, n, generator=gen)
    out = route.matmul_3xtf32(a, b, "interpret_tma")
    oracle = a.double() @ b.double()
    ref_err = (((a @ b).double() - oracle).norm() / oracle.norm()).item()
    err = ((out.double() - oracle).norm() / oracle.norm()).item()
    assert err <= max(2 * ref_err, 2.0**-22), f"3xTF32 error {err:.3g} against fp32's {ref_err:.3g}"


def test_mean_losses_finish_adds_partials_without_fp32_rounding():
    """One partial of 2^25 and 2048 of 1.0: an fp32 running sum drops the ones that land in 2^25's lane (its ulp is
    4); the finish adds in float64, so the result is the exact 2^25 + 2048 (an fp32 number)."""
    launch_module = load_route("launch")
    partials = torch.zeros(3000)
    partials[0] = 2.0**25
    partials[1:2049] = 1.0
    out = torch.empty(())
    launch_module.finish_mean(partials, out, 3000, 1.0)
    assert out.item() == 2.0**25 + 2048


def test_cross_entropy_finish_adds_partials_without_fp32_rounding():
    route = load_route("cross_entropy")
    losses = torch.zeros(3000)
    losses[0] = 2.0**25
    losses[1:2049] = 1.0
    counts = torch.ones(3000)
    out = torch.empty(())
    route._finish_ratio[(1,)](losses, counts, out, 3000, BLOCK=1024)
    assert out.item() == torch.tensor((2.0**25 + 2048) / 3000, dtype=torch.float64).float().item()


def test_sum_dim_folds_its_partial_sums_without_fp32_rounding():
    """2^24 then seven ones down a column: the exact 2^24 + 7 rounds to 2^24 + 8; an fp32 fold of the per-row
    partial sums drops ones into 2^24's ulp of 2."""
    x = torch.ones(1, 8, 3)
    x[0, 0, :] = 2.0**24
    out, _ = _run("sum_dim", x, init=[1])
    torch.testing.assert_close(out, x.double().sum(dim=1, keepdim=True).float(), rtol=0, atol=0)
