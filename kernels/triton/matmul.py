"""fp32 matrix product ``A @ B`` on the tensor cores by 3xTF32 splitting, never plain TF32.

Each operand element is split into x = hi + lo where hi is x rounded to the nearest TF32 value (10 mantissa bits)
and lo is the remainder, itself rounded to TF32; both are fp32 values that TF32 holds exactly, so the tensor cores'
TF32 reads lose nothing more. The product accumulates A_hi B_hi + A_hi B_lo + A_lo B_hi in fp32 (the dropped
A_lo B_lo is below fp32 rounding), three TF32 dots per K tile. Rounding to nearest (rather than truncating) keeps the
split's errors unbiased, which matters for all-positive inputs whose errors would otherwise pile up on one side.

Where each operand is split is the config's ``ops`` (kernels/NOTES.md, "matmul", says what each costs):
- ``presplit``: both by a memory-bound pass before the product kernel (A's halves as A, B's written transposed,
  K-contiguous: the only B layout Hopper's TF32 wgmma reads from shared memory);
- ``split_a``: A loaded raw and split in registers inside the product kernel (the wgmma's A operand may live in
  registers), B's halves by the pass: one pass less, and a quarter fewer operand bytes through L2 and shared
  memory;
- ``split_b``: the same with the roles swapped: the kernel computes tiles of C^T = B^T A^T, B raw is the register
  operand (so it needs no transposing pass), A's halves come from the plain split pass;
- ``tf32x3``: both raw, split by Triton's own ``input_precision="tf32x3"`` dot; no pass at all;
- ``one_dot``: the halves of ``presplit``, but one dot per K step: the three products run as three steps over the
  (lo, hi), (hi, lo), (hi, hi) pairs of halves. Triton waits for the tensor cores to finish after each of several
  dots chained in one loop iteration, but keeps a single dot's work in flight across iterations; the price is that
  a_hi and b_hi tiles are fetched twice. The partial sum goes into the running sum every ``flush`` K tiles.
Operand tiles come by pointer loads or by TMA descriptors (``tma``), one program per output tile or a persistent
grid of one program per SM (``persistent``).
"""

import os

import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

try:
    from .launch import Graphs  # imported as kernels.triton.<problem>
except ImportError:  # loaded as a file by the harness, with the route directory on sys.path
    from launch import Graphs

_INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"

OPS = ("presplit", "split_a", "split_b", "tf32x3", "one_dot")
_PRESPLIT = tl.constexpr(0)
_SPLIT_A = tl.constexpr(1)
_SPLIT_B = tl.constexpr(2)
_TF32X3 = tl.constexpr(3)
_ONE_DOT = tl.constexpr(4)


def config(
    ops="presplit", bm=128, bn=128, bk=32, warps=8, stages=3, group_m=8,
    tma=False, persistent=False, c_tma=False, flush=1, split_block=4096, split_tile=64,
) -> dict:  # fmt: skip
    """One launch configuration of the product (flush: one_dot's K tiles a partial sum; the split passes:
    split_block elements a program for A, split_tile x split_tile tiles for B's transposed split)."""
    if ops not in OPS:
        raise ValueError(f"ops must be one of {OPS}, not {ops!r}")
    return {
        "ops": ops, "BM": bm, "BN": bn, "BK": bk, "GROUP_M": group_m, "num_warps": warps, "num_stages": stages,
        "tma": tma, "persistent": persistent, "c_tma": c_tma, "flush": flush,
        "split_block": split_block, "split_tile": split_tile,
    }  # fmt: skip


# The bench (bench/kernels/run.py) times every variant beside the shipped default (the slower configs the issue-18
# sweep and issue 39 measured are in their records: bench/kernels/results_issue18/, kernels/results/runs/issue39_1);
# bench/kernels/matmul_sweep.py sweeps many more configs and names each as the config(...) call that ships it. Each
# fits the H200's 227 KB of shared memory a block by the sweep's arithmetic (its smem_estimate;
# tests/kernels/test_matmul_sweep.py).
VARIANTS = {
    # one dot per K step over the stacked halves, TMA loads, 128x128x64, 3 stages (192 KB): 1.294-1.301 ms on the
    # H200 (issue-18 sweep, interleaved rounds), 1.417 on an H100 (issue 39), against the pointer kernel's 1.40-1.42
    # and 1.434; its error ratio 0.33 (kernels/RESULTS.md)
    "default": config("one_dot", tma=True, bk=64, stages=3),
    "presplit_k32_s3": config(),  # the default until issue 39: pointer loads, three chained dots a K tile
    "presplit_tma_k32_s3": config(tma=True),
    "split_a_tma_k32_s4": config("split_a", tma=True, stages=4),  # 1.323 on the H100, 1.324-1.388 on the H200
    "one_dot_tma_k64_s3_g16": config("one_dot", tma=True, bk=64, stages=3, group_m=16),
    "interpret": config(bm=32, bn=32, bk=16, warps=4, stages=1, group_m=2, split_block=256, split_tile=16),
    "interpret_tma": config(bm=32, bn=32, bk=16, warps=4, stages=1, group_m=2, tma=True, persistent=True),
    "interpret_one_dot": config("one_dot", bm=32, bn=32, bk=16, warps=4, stages=1, group_m=2, flush=2),
    "interpret_one_dot_tma": config("one_dot", bm=32, bn=32, bk=16, warps=4, stages=1, group_m=2, tma=True),
}

_TF32_ROUND = tl.constexpr(0x1000)  # half of the 13 dropped mantissa bits
_TF32_KEEP = tl.constexpr(0xFFFFE000)  # sign, exponent and the 10 mantissa bits TF32 keeps


@triton.jit
def _round_tf32(x):
    bits = x.to(tl.uint32, bitcast=True)
    return ((bits + _TF32_ROUND) & _TF32_KEEP).to(tl.float32, bitcast=True)


@triton.jit
def _split_regs(x):
    hi = _round_tf32(x)
    return hi, _round_tf32(x - hi)


@triton.jit
def _split_tf32(x_ptr, hi_ptr, lo_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    hi, lo = _split_regs(tl.load(x_ptr + offs, mask=mask, other=0.0))
    tl.store(hi_ptr + offs, hi, mask=mask)
    tl.store(lo_ptr + offs, lo, mask=mask)


@triton.jit
def _split_tf32_transposed(x_ptr, hi_ptr, lo_ptr, rows, cols, BT: tl.constexpr):
    """x (rows, cols) -> hi, lo (cols, rows): B is stored K-contiguous, the layout TF32 wgmma reads B in."""
    r = tl.program_id(0) * BT + tl.arange(0, BT)
    c = tl.program_id(1) * BT + tl.arange(0, BT)
    x = tl.load(x_ptr + r[:, None].to(tl.int64) * cols + c[None, :], mask=(r < rows)[:, None] & (c < cols)[None, :])
    hi, lo = _split_regs(x)
    out = c[:, None].to(tl.int64) * rows + r[None, :]
    out_mask = (c < cols)[:, None] & (r < rows)[None, :]
    tl.store(hi_ptr + out, tl.trans(hi), mask=out_mask)
    tl.store(lo_ptr + out, tl.trans(lo), mask=out_mask)


@triton.jit
def _add_products(acc, x_hi, x_lo, y_hi, y_lo):
    """acc + x_lo y_hi + x_hi y_lo + x_hi y_hi. The tensor cores add into their accumulator with truncation; over
    all of K that drifts low on positive data (4e-5 measured: kernels/NOTES.md). So each K tile's three products
    start from zero, smallest first, and the tile's sum joins the running sum by an ordinary rounded fp32 add."""
    part = tl.dot(x_lo, y_hi, input_precision="tf32")
    part = tl.dot(x_hi, y_lo, part, input_precision="tf32")
    part = tl.dot(x_hi, y_hi, part, input_precision="tf32")
    return acc + part


@triton.jit
def _tile_origin(tile, M, N, BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr):
    """Grouped order: GROUP_M row blocks share each column block of B while it sits in L2."""
    grid_n = tl.cdiv(N, BN)
    in_group = GROUP_M * grid_n
    first_m = (tile // in_group) * GROUP_M
    group_rows = min(tl.cdiv(M, BM) - first_m, GROUP_M)
    return (first_m + (tile % in_group) % group_rows) * BM, ((tile % in_group) // group_rows) * BN


@triton.jit
def _load_tile(ptr, offs, rows_ok, cols_ok, EVEN: tl.constexpr):
    if EVEN:  # every tile is whole: no masks to compute
        tile = tl.load(ptr + offs)
    else:
        tile = tl.load(ptr + offs, mask=rows_ok[:, None] & cols_ok[None, :], other=0.0)
    return tile


@triton.jit
def _three_dots_ptr(
    a_ptr, a_lo_ptr, b_ptr, b_lo_ptr, M, N, K, om, on,
    OPS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, EVEN: tl.constexpr,
):  # fmt: skip
    """The tile's sum over K (of C, or of C^T for split_b), the products of each K step from one set of loads."""
    rm = om + tl.arange(0, BM)
    rn = on + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    m_ok = rm < M
    n_ok = rn < N
    a_offs = rm[:, None].to(tl.int64) * K + rk[None, :]
    if OPS == _SPLIT_B or OPS == _TF32X3:
        b_offs = rk[:, None].to(tl.int64) * N + rn[None, :]  # (BK, BN) of B
    else:
        b_offs = rn[:, None].to(tl.int64) * K + rk[None, :]  # (BN, BK) of B^T
    if OPS == _SPLIT_B:
        acc = tl.zeros([BN, BM], dtype=tl.float32)  # a tile of C^T
    else:
        acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k0 in range(0, K, BK):
        k_ok = k0 + rk < K
        a = _load_tile(a_ptr, a_offs, m_ok, k_ok, EVEN)
        if OPS == _PRESPLIT:
            a_lo = _load_tile(a_lo_ptr, a_offs, m_ok, k_ok, EVEN)
            b_hi = _load_tile(b_ptr, b_offs, n_ok, k_ok, EVEN)
            b_lo = _load_tile(b_lo_ptr, b_offs, n_ok, k_ok, EVEN)
            acc = _add_products(acc, a, a_lo, b_hi.T, b_lo.T)
        elif OPS == _SPLIT_A:
            a_hi, a_lo = _split_regs(a)
            b_hi = _load_tile(b_ptr, b_offs, n_ok, k_ok, EVEN)
            b_lo = _load_tile(b_lo_ptr, b_offs, n_ok, k_ok, EVEN)
            acc = _add_products(acc, a_hi, a_lo, b_hi.T, b_lo.T)
        elif OPS == _SPLIT_B:
            a_lo = _load_tile(a_lo_ptr, a_offs, m_ok, k_ok, EVEN)
            b_hi, b_lo = _split_regs(_load_tile(b_ptr, b_offs, k_ok, n_ok, EVEN))
            acc = _add_products(acc, b_hi.T, b_lo.T, a.T, a_lo.T)
        else:
            b = _load_tile(b_ptr, b_offs, k_ok, n_ok, EVEN)
            acc += tl.dot(a, b, input_precision="tf32x3")  # from zero, then a rounded add: see _add_products
        a_offs += BK
        if OPS == _SPLIT_B or OPS == _TF32X3:
            b_offs += BK * N
        else:
            b_offs += BK
    return acc


@triton.jit
def _one_dot_ptr(
    a_ptr, a_lo_ptr, b_ptr, b_lo_ptr, M, N, K, om, on,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, FLUSH: tl.constexpr, EVEN: tl.constexpr,
):  # fmt: skip
    """The tile's sum over K, one dot per step: step s of a K tile takes the (lo, hi), (hi, lo), (hi, hi) halves of
    (A, B^T) for s = 0, 1, 2. The partial sum of FLUSH K tiles joins the running sum by a rounded fp32 add (see
    _add_products); its dots chain across steps, which is what lets Triton keep them in flight."""
    rm = om + tl.arange(0, BM)
    rn = on + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    m_ok = rm < M
    n_ok = rn < N
    a_offs = rm[:, None].to(tl.int64) * K + rk[None, :]
    b_offs = rn[:, None].to(tl.int64) * K + rk[None, :]
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    part = tl.zeros([BM, BN], dtype=tl.float32)
    # one loop over all steps, the flush a branch in it: nested loops would drain the pipeline at every flush
    for step in range(0, 3 * tl.cdiv(K, BK)):
        k0 = (step // 3) * BK
        k_ok = k0 + rk < K
        x = _load_tile(tl.where(step % 3 == 0, a_lo_ptr, a_ptr), a_offs + k0, m_ok, k_ok, EVEN)
        y = _load_tile(tl.where(step % 3 == 1, b_lo_ptr, b_ptr), b_offs + k0, n_ok, k_ok, EVEN)
        part = tl.dot(x, y.T, part, input_precision="tf32")
        if step % (3 * FLUSH) == 3 * FLUSH - 1:
            acc += part
            part = tl.zeros([BM, BN], dtype=tl.float32)
    acc += part  # what the last flush left (K tiles not a multiple of FLUSH)
    return acc


@triton.jit
def _store_tile(c_ptr, acc, M, N, om, on, BM: tl.constexpr, BN: tl.constexpr):
    rm = om + tl.arange(0, BM)
    rn = on + tl.arange(0, BN)
    tl.store(c_ptr + rm[:, None].to(tl.int64) * N + rn[None, :], acc, mask=(rm < M)[:, None] & (rn < N)[None, :])


@triton.jit
def _product_tile_ptr(
    a_ptr, a_lo_ptr, b_ptr, b_lo_ptr, c_ptr, M, N, K, om, on,
    OPS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, FLUSH: tl.constexpr,
    EVEN: tl.constexpr,
):  # fmt: skip
    """One BM x BN tile of C from pointer loads. a_ptr: A (M, K), raw (split_a, tf32x3) or its hi half; b_ptr: B
    (K, N) raw (split_b, tf32x3) or the hi half of B^T (N, K); the lo pointers are the other halves where used."""
    if OPS == _ONE_DOT:
        acc = _one_dot_ptr(a_ptr, a_lo_ptr, b_ptr, b_lo_ptr, M, N, K, om, on, BM, BN, BK, FLUSH, EVEN)
    else:
        acc = _three_dots_ptr(a_ptr, a_lo_ptr, b_ptr, b_lo_ptr, M, N, K, om, on, OPS, BM, BN, BK, EVEN)
    if OPS == _SPLIT_B:
        acc = acc.T
    _store_tile(c_ptr, acc, M, N, om, on, BM, BN)


@triton.jit
def _matmul_ptr(
    a_ptr, a_lo_ptr, b_ptr, b_lo_ptr, c_ptr, M, N, K,
    OPS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
    FLUSH: tl.constexpr, EVEN: tl.constexpr, PROGRAMS: tl.constexpr, PERSISTENT: tl.constexpr,
):  # fmt: skip
    if PERSISTENT:  # PROGRAMS programs walk the tiles; the next tile's loads can start under this tile's epilogue
        for tile in tl.range(tl.program_id(0), tl.cdiv(M, BM) * tl.cdiv(N, BN), PROGRAMS, flatten=True):
            om, on = _tile_origin(tile, M, N, BM, BN, GROUP_M)
            _product_tile_ptr(a_ptr, a_lo_ptr, b_ptr, b_lo_ptr, c_ptr, M, N, K, om, on, OPS, BM, BN, BK, FLUSH, EVEN)
    else:
        om, on = _tile_origin(tl.program_id(0), M, N, BM, BN, GROUP_M)
        _product_tile_ptr(a_ptr, a_lo_ptr, b_ptr, b_lo_ptr, c_ptr, M, N, K, om, on, OPS, BM, BN, BK, FLUSH, EVEN)


@triton.jit
def _product_tile_tma(
    a_desc, a_lo_desc, b_desc, b_lo_desc, c, M, N, K, om, on,
    OPS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, FLUSH: tl.constexpr,
    C_TMA: tl.constexpr,
):  # fmt: skip
    """_product_tile_ptr with every operand tile fetched through a TMA descriptor (out-of-range elements read as
    zero): A or its hi half (M, K) by [BM, BK]; B (K, N) by [BK, BN] or B^T's hi half (N, K) by [BN, BK]; for
    one_dot, A's halves stacked (2M, K) and B^T's (2N, K), hi first (rows past a half's end only reach rows or
    columns of C past its end, which are not stored). c: C's descriptor by [BM, BN] (C_TMA: the tile is stored
    through shared memory) or C's pointer."""
    if OPS == _SPLIT_B:
        acc = tl.zeros([BN, BM], dtype=tl.float32)  # a tile of C^T
    else:
        acc = tl.zeros([BM, BN], dtype=tl.float32)
    if OPS == _ONE_DOT:  # as _one_dot_ptr
        part = tl.zeros([BM, BN], dtype=tl.float32)
        for step in range(0, 3 * tl.cdiv(K, BK)):
            k0 = (step // 3) * BK
            x = a_desc.load([om + tl.where(step % 3 == 0, M, 0), k0])
            y = b_desc.load([on + tl.where(step % 3 == 1, N, 0), k0])
            part = tl.dot(x, y.T, part, input_precision="tf32")
            if step % (3 * FLUSH) == 3 * FLUSH - 1:
                acc += part
                part = tl.zeros([BM, BN], dtype=tl.float32)
        acc += part
    else:
        for k in range(0, K, BK):
            a = a_desc.load([om, k])
            if OPS == _PRESPLIT:
                a_lo = a_lo_desc.load([om, k])
                acc = _add_products(acc, a, a_lo, b_desc.load([on, k]).T, b_lo_desc.load([on, k]).T)
            elif OPS == _SPLIT_A:
                a_hi, a_lo = _split_regs(a)
                acc = _add_products(acc, a_hi, a_lo, b_desc.load([on, k]).T, b_lo_desc.load([on, k]).T)
            elif OPS == _SPLIT_B:
                b_hi, b_lo = _split_regs(b_desc.load([k, on]))
                acc = _add_products(acc, b_hi.T, b_lo.T, a.T, a_lo_desc.load([om, k]).T)
            else:
                acc += tl.dot(a, b_desc.load([k, on]), input_precision="tf32x3")
    if OPS == _SPLIT_B:
        acc = acc.T
    if C_TMA:
        c.store([om, on], acc)
    else:
        _store_tile(c, acc, M, N, om, on, BM, BN)


@triton.jit
def _matmul_tma(
    a_desc, a_lo_desc, b_desc, b_lo_desc, c, M, N, K,
    OPS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
    FLUSH: tl.constexpr, C_TMA: tl.constexpr, PROGRAMS: tl.constexpr, PERSISTENT: tl.constexpr,
):  # fmt: skip
    if PERSISTENT:  # as in _matmul_ptr
        for tile in tl.range(tl.program_id(0), tl.cdiv(M, BM) * tl.cdiv(N, BN), PROGRAMS, flatten=True):
            om, on = _tile_origin(tile, M, N, BM, BN, GROUP_M)
            _product_tile_tma(a_desc, a_lo_desc, b_desc, b_lo_desc, c, M, N, K, om, on, OPS, BM, BN, BK, FLUSH, C_TMA)
    else:
        om, on = _tile_origin(tl.program_id(0), M, N, BM, BN, GROUP_M)
        _product_tile_tma(a_desc, a_lo_desc, b_desc, b_lo_desc, c, M, N, K, om, on, OPS, BM, BN, BK, FLUSH, C_TMA)


def _tma_ok(*tensors) -> bool:
    """A TMA descriptor needs a 16-byte aligned base and 16-byte row strides."""
    return all(t.data_ptr() % 16 == 0 and (t.shape[-1] * t.element_size()) % 16 == 0 for t in tensors)


def _programs(tiles: int, cfg: dict, device) -> int:
    if not cfg["persistent"]:
        return tiles
    sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4
    return min(tiles, sms)


def launches(
    a: torch.Tensor, b: torch.Tensor, cfg: dict, c: torch.Tensor | None = None
) -> tuple[torch.Tensor, list[tuple]]:
    """C (allocated here unless given, unwritten) and the kernel launches that compute C = A @ B under cfg, in order,
    each as (kernel, grid, args, options): the split pass(es) of cfg["ops"], then the product."""
    (M, K), N = a.shape, b.shape[1]
    ops = cfg["ops"]
    steps = []
    a_lo = b_lo = a_halves = bt_halves = None
    if ops in ("presplit", "split_b", "one_dot"):
        a_halves = torch.empty((2 * M, K), device=a.device, dtype=torch.float32)  # hi rows, then lo rows
        a_hi, a_lo = a_halves[:M], a_halves[M:]
        block = cfg["split_block"]
        grid = (triton.cdiv(a.numel(), block),)
        steps.append((_split_tf32, grid, (a, a_hi, a_lo, a.numel()), {"BLOCK": block, "num_warps": 8}))
        a = a_hi
    if ops in ("presplit", "split_a", "one_dot"):
        bt_halves = torch.empty((2 * N, K), device=b.device, dtype=torch.float32)
        bt_hi, b_lo = bt_halves[:N], bt_halves[N:]
        tile = cfg["split_tile"]
        grid = (triton.cdiv(K, tile), triton.cdiv(N, tile))
        steps.append((_split_tf32_transposed, grid, (b, bt_hi, b_lo, K, N), {"BT": tile, "num_warps": 8}))
        b = bt_hi
    if c is None:
        c = torch.empty((M, N), device=a.device, dtype=torch.float32)
    bm, bn, bk = cfg["BM"], cfg["BN"], cfg["BK"]
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    programs = _programs(tiles, cfg, c.device)
    options = {
        "OPS": OPS.index(ops), "BM": bm, "BN": bn, "BK": bk, "GROUP_M": cfg["GROUP_M"], "FLUSH": cfg["flush"],
        "PROGRAMS": programs, "PERSISTENT": cfg["persistent"], "num_warps": cfg["num_warps"],
        "num_stages": cfg["num_stages"],
    }  # fmt: skip
    if cfg["tma"] and _tma_ok(*[t for t in (a, a_lo, b, b_lo, c) if t is not None]):
        b_block = [bk, bn] if ops in ("split_b", "tf32x3") else [bn, bk]
        if ops == "one_dot":  # the stacked halves, one descriptor each
            operands = ((a_halves, [bm, bk]), (None, None), (bt_halves, b_block), (None, None))
        else:
            operands = ((a, [bm, bk]), (a_lo, [bm, bk]), (b, b_block), (b_lo, b_block))
        descs = [TensorDescriptor.from_tensor(t, block) if t is not None else None for t, block in operands]
        out = TensorDescriptor.from_tensor(c, [bm, bn]) if cfg["c_tma"] else c
        steps.append((_matmul_tma, (programs,), (*descs, out, M, N, K), options | {"C_TMA": cfg["c_tma"]}))
    else:
        even = M % bm == 0 and N % bn == 0 and K % bk == 0
        steps.append((_matmul_ptr, (programs,), (a, a_lo, b, b_lo, c, M, N, K), options | {"EVEN": even}))
    return c, steps


def run_launches(steps: list[tuple]) -> None:
    for kernel, grid, args, options in steps:
        kernel[grid](*args, **options)


_GRAPHS = Graphs()  # a call's split passes and product as one graph launch (launch.Graphs)


def matmul_3xtf32(a: torch.Tensor, b: torch.Tensor, variant: str | None = None, cfg: dict | None = None):
    """A @ B in fp32 accuracy; cfg (a ``config(...)``) or the named variant, else the default for this platform."""
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"cannot multiply {tuple(a.shape)} by {tuple(b.shape)}: need (M, K) @ (K, N)")
    if cfg is not None:  # a configuration under study (the sweep): launched as given, every call
        c, steps = launches(a.contiguous(), b.contiguous(), cfg)
        run_launches(steps)
        return c
    cfg = VARIANTS[variant or ("interpret" if _INTERPRET else "default")]
    a, b = a.contiguous(), b.contiguous()
    c = torch.empty((a.shape[0], b.shape[1]), device=a.device, dtype=torch.float32)
    _GRAPHS.run(lambda: run_launches(launches(a, b, cfg, c)[1]), (a, b, c), (variant,))
    return c


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.variant: str | None = None

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return matmul_3xtf32(A, B, self.variant)
