"""LayerNorm over the trailing ``normalized_shape`` dims with weight and bias (``nn.LayerNorm``).

A row here is 4M floats (16 MB), far more than one program can hold, so each row is cut into chunks. The default
(``two_pass``) reads x twice:
1. ``_chunk_moments``: each program writes its chunk's mean and sum of squared deviations (computed per tile around
   the tile's own mean and merged with Chan's formula, so no catastrophic cancellation of E[x^2] - E[x]^2);
2. ``_normalize``: each program merges its row's chunk moments into the row mean and variance, then writes
   (x - mean) * rstd * weight + bias for its chunk. It walks the chunks in the reverse order of step 1 so its first
   reads find the last chunks of step 1 still in L2, and both walk chunk-major (all rows of chunk 0, then chunk 1,
   ...) so that each weight and bias chunk comes from HBM once and from L2 for the other rows.

``fused`` runs both passes in one cooperative launch of a few programs per SM that meet once in between: work
items are (chunk, row) pairs, chunk-major; pass 1 walks them forward and reads its last ``keep_mb`` MB with
evict_last, pass 2 walks them backward (so its first reads find those in L2), reads x evict_first, weight and bias
evict_last (shared by the rows of a chunk) and streams y out (.cs). No launch gap, and the tail of pass 1 is re-read
from L2 rather than HBM.

Variants that read x from HBM once, in one cooperative launch where all programs take one row at a time and meet
per row: ``hold`` keeps each program's slice in registers from the load to the store (a row is half the register
file of the GPU, so the next row cannot be loaded while this one waits), ``l2`` re-reads it from L2. Both measured
slower than the two passes on the H200 (kernels/NOTES.md; bench/kernels/layer_norm_bound.py times their parts).
"""

import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

try:
    from .launch import Graphs, cdiv, launch, next_power_of_2, num_sms  # imported as kernels.triton.<problem>
except ImportError:  # loaded as a file by the harness, with the route directory on sys.path
    from launch import Graphs, cdiv, launch, next_power_of_2, num_sms

_INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
_PTX = tl.constexpr(not _INTERPRET)


def _coop(mode, slice_len, block, warps, programs_per_sm, prefetch=False):
    return {
        "mode": mode, "SLICE": slice_len, "BLOCK": block, "num_warps": warps, "programs_per_sm": programs_per_sm,
        "prefetch": prefetch,
    }  # fmt: skip


def _fused(chunk, warps, programs_per_sm, keep_mb):
    return {
        "mode": "fused", "CHUNK": chunk, "num_warps": warps, "programs_per_sm": programs_per_sm, "keep_mb": keep_mb,
    }  # fmt: skip


VARIANTS = {
    "default": {"mode": "two_pass", "CHUNK": 4096, "BLOCK": 2048, "num_warps": 4},
    "fused_c4096_w8_p4_k24": _fused(4096, 8, 4, 24),
    "fused_c4096_w8_p4_k40": _fused(4096, 8, 4, 40),
    "c2048_b2048_w4": {"mode": "two_pass", "CHUNK": 2048, "BLOCK": 2048, "num_warps": 4},
    "hold_s16384_w8_p2": _coop("hold", 16384, 16384, 8, 2),
    "hold_s16384_w8_p2_pf": _coop("hold", 16384, 16384, 8, 2, prefetch=True),
    "hold_s32768_w32": _coop("hold", 32768, 32768, 32, 1),
    "l2_s16384_b4096_w8_p2": _coop("l2", 16384, 4096, 8, 2),
    "interpret": {"mode": "two_pass", "CHUNK": 256, "BLOCK": 64, "num_warps": 4},
    "interpret_fused": _fused(64, 4, 1, 0),
    "interpret_hold": _coop("hold", 1024, 1024, 4, 1, prefetch=True),
    "interpret_l2": _coop("l2", 1024, 64, 4, 1),
}


@triton.jit
def _moments(x_ptr, start, length, cols, BLOCK: tl.constexpr, KEEP: tl.constexpr):
    """(count, mean, sum of squared deviations) of x[start : start + length], clipped at cols; per tile around the
    tile's own mean, merged with Chan's formula (no E[x^2] - E[x]^2 cancellation). KEEP: x is read again soon."""
    count = 0.0
    mean = 0.0
    m2 = 0.0
    for off in range(0, length, BLOCK):
        c = start + off + tl.arange(0, BLOCK)
        mask = c < cols
        x = tl.load(x_ptr + c, mask=mask, other=0.0, eviction_policy="evict_last" if KEEP else "")
        n_tile = tl.sum(mask.to(tl.float32), axis=0)
        if n_tile > 0:
            tile_mean = tl.sum(x, axis=0) / n_tile
            dev = tl.where(mask, x - tile_mean, 0.0)
            tile_m2 = tl.sum(dev * dev, axis=0)
            total = count + n_tile
            delta = tile_mean - mean
            mean = mean + delta * (n_tile / total)
            m2 = m2 + tile_m2 + delta * delta * (count * n_tile / total)
            count = total
    return mean, m2


@triton.jit
def _row_mean_rstd(mean_ptr, m2_ptr, num_chunks, cols, eps, CHUNK, BLOCK_P: tl.constexpr):
    """Merge a row's chunk moments (every chunk but the last holds CHUNK elements) into its mean and 1/std."""
    i = tl.arange(0, BLOCK_P)
    i_mask = i < num_chunks
    counts = tl.where(i_mask, tl.minimum(cols - i * CHUNK, CHUNK), 0).to(tl.float32)
    means = tl.load(mean_ptr + i, mask=i_mask, other=0.0, volatile=True)
    m2s = tl.load(m2_ptr + i, mask=i_mask, other=0.0, volatile=True)
    mean = tl.sum(counts * means, axis=0) / cols
    dev = tl.where(i_mask, means - mean, 0.0)
    var = (tl.sum(m2s, axis=0) + tl.sum(counts * dev * dev, axis=0)) / cols
    return mean, 1.0 / tl.sqrt_rn(var + eps)


@triton.jit
def _meet(arrived_ptr, count):
    """Release this program's stores, then wait until count programs have arrived at the same counter."""
    tl.debug_barrier()  # every thread's stores are done before the release below
    tl.atomic_add(arrived_ptr, 1, sem="release")
    while tl.atomic_add(arrived_ptr, 0, sem="acquire") < count:
        pass
    tl.debug_barrier()


@triton.jit
def _prefetch_l2(ptr, start, length, end, BLOCK: tl.constexpr):
    """Ask L2 to fetch (and keep: evict_last) the floats ptr[start : start + length], clipped at end, one request
    per 32-byte sector; a hint: no register is filled and nothing waits for it. Skipped by the interpreter, which
    has no PTX (the result does not depend on it)."""
    if _PTX:
        for off in range(0, length, BLOCK):
            idx = tl.minimum(start + off + tl.arange(0, BLOCK // 8) * 8, end - 1)
            tl.inline_asm_elementwise(
                "prefetch.global.L2::evict_last [$1];\n\tmov.u32 $0, 0;",
                "=r,l",
                [ptr + idx],
                dtype=tl.int32,
                is_pure=False,
                pack=1,
            )


@triton.jit
def _hold_layer_norm(
    x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, m2_ptr, arrived_ptr, rows, cols, eps,
    SLICE: tl.constexpr, BLOCK_P: tl.constexpr, PREFETCH: tl.constexpr,
):  # fmt: skip
    # All programs take one row at a time, each its own slice, kept in registers from the load to the store: x is
    # read from HBM once and never re-read; weight and bias (the same slice for every row) are kept in L2.
    # PREFETCH: the next row's slice is asked of L2 before the meeting (a hint; registers hold one row only).
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    c = pid * SLICE + tl.arange(0, SLICE)
    mask = c < cols
    n = tl.minimum(cols - pid * SLICE, SLICE).to(tl.float32)
    for row in range(rows):
        row_start = tl.cast(row, tl.int64) * cols
        x = tl.load(x_ptr + row_start + c, mask=mask, other=0.0, eviction_policy="evict_first")
        part_mean = tl.sum(x, axis=0) / n
        dev = tl.where(mask, x - part_mean, 0.0)
        tl.store(mean_ptr + row * nprog + pid, part_mean)
        tl.store(m2_ptr + row * nprog + pid, tl.sum(dev * dev, axis=0))
        if PREFETCH:  # ask L2 for this slice of the next row now, so that the HBM reads overlap the meeting
            next_start = tl.cast(tl.minimum(row + 1, rows - 1), tl.int64) * cols
            _prefetch_l2(x_ptr + next_start, pid * SLICE, SLICE, cols, SLICE)
        _meet(arrived_ptr + row, nprog)
        mean, rstd = _row_mean_rstd(mean_ptr + row * nprog, m2_ptr + row * nprog, nprog, cols, eps, SLICE, BLOCK_P)
        w = tl.load(w_ptr + c, mask=mask, other=0.0, eviction_policy="evict_last")
        b = tl.load(b_ptr + c, mask=mask, other=0.0, eviction_policy="evict_last")
        tl.store(y_ptr + row_start + c, (x - mean) * rstd * w + b, mask=mask, cache_modifier=".cs")


@triton.jit
def _l2_layer_norm(
    x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, m2_ptr, arrived_ptr, rows, cols, eps,
    SLICE: tl.constexpr, BLOCK: tl.constexpr, BLOCK_P: tl.constexpr,
):  # fmt: skip
    # As _hold_layer_norm, but each slice is walked in tiles and re-read for the normalisation: from L2 if the row
    # (evict_last on the first read) and weight and bias all stay there.
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    start = pid * SLICE
    for row in range(rows):
        row_start = tl.cast(row, tl.int64) * cols
        part_mean, part_m2 = _moments(x_ptr + row_start, start, SLICE, cols, BLOCK, True)
        tl.store(mean_ptr + row * nprog + pid, part_mean)
        tl.store(m2_ptr + row * nprog + pid, part_m2)
        _meet(arrived_ptr + row, nprog)
        mean, rstd = _row_mean_rstd(mean_ptr + row * nprog, m2_ptr + row * nprog, nprog, cols, eps, SLICE, BLOCK_P)
        for i in range(0, SLICE // BLOCK):  # last tiles first: the most recently read
            c = start + SLICE - (i + 1) * BLOCK + tl.arange(0, BLOCK)
            mask = c < cols
            x = tl.load(x_ptr + row_start + c, mask=mask, other=0.0, eviction_policy="evict_first")
            w = tl.load(w_ptr + c, mask=mask, other=0.0, eviction_policy="evict_last")
            b = tl.load(b_ptr + c, mask=mask, other=0.0, eviction_policy="evict_last")
            tl.store(y_ptr + row_start + c, (x - mean) * rstd * w + b, mask=mask, cache_modifier=".cs")


@triton.jit
def _fill_zero(ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(ptr + offs, tl.zeros([BLOCK], dtype=tl.int32), mask=offs < n)


@triton.jit
def _chunk_moments(x_ptr, mean_ptr, m2_ptr, rows, cols, num_chunks, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    # chunk-major order, as in _normalize
    chunk = tl.program_id(0) // rows
    row = tl.program_id(0) % rows
    mean, m2 = _moments(x_ptr + row.to(tl.int64) * cols, chunk * CHUNK, CHUNK, cols, BLOCK, False)
    tl.store(mean_ptr + row * num_chunks + chunk, mean)
    tl.store(m2_ptr + row * num_chunks + chunk, m2)


@triton.jit
def _normalize(
    x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, m2_ptr, rows, cols, num_chunks, eps,
    CHUNK: tl.constexpr, BLOCK: tl.constexpr, BLOCK_P: tl.constexpr,
):  # fmt: skip
    # chunk-major order: the rows' programs for one chunk run together and share its weight and bias through L2;
    # reversed relative to _chunk_moments, so the first chunks read here are the last ones it read
    pid = tl.num_programs(0) - 1 - tl.program_id(0)
    chunk = pid // rows
    row = pid % rows
    chunk_start = chunk * CHUNK
    mean, rstd = _row_mean_rstd(
        mean_ptr + row * num_chunks, m2_ptr + row * num_chunks, num_chunks, cols, eps, CHUNK, BLOCK_P
    )
    row_start = row.to(tl.int64) * cols
    for off in range(0, CHUNK, BLOCK):
        c = chunk_start + off + tl.arange(0, BLOCK)
        mask = c < cols
        x = tl.load(x_ptr + row_start + c, mask=mask, other=0.0)
        w = tl.load(w_ptr + c, mask=mask, other=0.0)
        b = tl.load(b_ptr + c, mask=mask, other=0.0)
        tl.store(y_ptr + row_start + c, (x - mean) * rstd * w + b, mask=mask)


@triton.jit
def _fused_layer_norm(
    x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, m2_ptr, arrived_ptr, rows, cols, num_chunks, eps, keep_items,
    CHUNK: tl.constexpr, BLOCK_P: tl.constexpr,
):  # fmt: skip
    # Both passes of two_pass in one cooperative launch, the programs meeting once in between. Work items are
    # (chunk, row) pairs in chunk-major order, one CHUNK-wide tile each. Pass 1 walks them forward, the last
    # keep_items read evict_last; pass 2 walks them backward, so its first reads find those in L2. With a program
    # count that is a multiple of rows, a program sees one row in pass 2 and merges that row's moments once.
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    items = rows * num_chunks
    offs = tl.arange(0, CHUNK)
    for i in range(pid, items, nprog):
        chunk = i // rows
        row = i % rows
        c = chunk * CHUNK + offs
        mask = c < cols
        ptrs = x_ptr + row.to(tl.int64) * cols + c
        if i >= items - keep_items:
            x = tl.load(ptrs, mask=mask, other=0.0, eviction_policy="evict_last")
        else:
            x = tl.load(ptrs, mask=mask, other=0.0, eviction_policy="evict_first")
        n = tl.minimum(cols - chunk * CHUNK, CHUNK).to(tl.float32)
        chunk_mean = tl.sum(x, axis=0) / n
        dev = tl.where(mask, x - chunk_mean, 0.0)
        tl.store(mean_ptr + row * num_chunks + chunk, chunk_mean)
        tl.store(m2_ptr + row * num_chunks + chunk, tl.sum(dev * dev, axis=0))
    _meet(arrived_ptr, nprog)
    cur_row = -1
    mean = 0.0
    rstd = 0.0
    for j in range(pid, items, nprog):
        i = items - 1 - j
        chunk = i // rows
        row = i % rows
        if row != cur_row:
            mean, rstd = _row_mean_rstd(
                mean_ptr + row * num_chunks, m2_ptr + row * num_chunks, num_chunks, cols, eps, CHUNK, BLOCK_P
            )
            cur_row = row
        c = chunk * CHUNK + offs
        mask = c < cols
        row_start = row.to(tl.int64) * cols
        x = tl.load(x_ptr + row_start + c, mask=mask, other=0.0, eviction_policy="evict_first")
        w = tl.load(w_ptr + c, mask=mask, other=0.0, eviction_policy="evict_last")
        b = tl.load(b_ptr + c, mask=mask, other=0.0, eviction_policy="evict_last")
        tl.store(y_ptr + row_start + c, (x - mean) * rstd * w + b, mask=mask, cache_modifier=".cs")


def _max_registers(cfg: dict) -> int:
    """Registers per thread that let programs_per_sm programs share an SM (65536 registers), so that the
    cooperative launch fits; ptxas spills rather than exceed it."""
    return min(255, 65536 // (32 * cfg["num_warps"] * cfg["programs_per_sm"]) // 8 * 8)


def programs_per_row(cfg: dict, cols: int) -> int:
    """How many programs of a cooperative variant meet for one row (they must run at the same time)."""
    if cfg["mode"] == "two_pass":
        return 1
    if cfg["mode"] == "fused":  # every program of the launch meets all others once: programs_per_sm on each SM
        return cfg["programs_per_sm"]
    return cdiv(cols, min(cfg["SLICE"], next_power_of_2(cols)))


def _launch_coop(x, w, b, y, rows, cols, eps, cfg) -> bool:
    """One cooperative launch, all programs on one row at a time; False (nothing launched) when a row needs more
    programs than the GPU holds at once."""
    slice_len = min(cfg["SLICE"], next_power_of_2(cols))
    block = min(cfg["BLOCK"], slice_len)
    programs = cdiv(cols, slice_len)
    if programs > num_sms(x.device) * cfg["programs_per_sm"]:
        return False
    means = torch.empty(rows * programs, device=x.device, dtype=torch.float32)
    m2s = torch.empty(rows * programs, device=x.device, dtype=torch.float32)
    arrived = torch.empty(rows, device=x.device, dtype=torch.int32)
    _fill_zero[(cdiv(rows, 1024),)](arrived, rows, BLOCK=1024)
    args = (x, w, b, y, means, m2s, arrived, rows, cols, eps)
    launch = {"num_warps": cfg["num_warps"], "maxnreg": _max_registers(cfg), "launch_cooperative_grid": True}
    block_p = next_power_of_2(programs)
    if cfg["mode"] == "hold":
        _hold_layer_norm[(programs,)](*args, SLICE=slice_len, BLOCK_P=block_p, PREFETCH=cfg["prefetch"], **launch)
    else:
        _l2_layer_norm[(programs,)](*args, SLICE=slice_len, BLOCK=block, BLOCK_P=block_p, **launch)
    return True


def _fused_programs(rows: int, items: int, slots: int) -> int:
    """Programs of the fused launch: at most the GPU's slots (all must be resident: they meet), and a multiple of
    rows where that leaves at least 7/8 of the slots busy, so that each program sees one row in pass 2."""
    programs = min(items, slots)
    if rows <= programs and programs // rows * rows * 8 >= programs * 7:
        programs = programs // rows * rows
    return programs


def _launch_fused(x, w, b, y, rows, cols, eps, cfg) -> None:
    chunk = min(cfg["CHUNK"], next_power_of_2(cols))
    chunks = cdiv(cols, chunk)
    items = rows * chunks
    # the interpreter runs programs one after another: a meeting of several would wait forever
    slots = 1 if _INTERPRET else num_sms(x.device) * cfg["programs_per_sm"]
    programs = _fused_programs(rows, items, slots)
    keep_items = cfg["keep_mb"] * (1 << 20) // (chunk * 4)

    def body():
        means = torch.empty(items, device=x.device, dtype=torch.float32)
        m2s = torch.empty(items, device=x.device, dtype=torch.float32)
        arrived = torch.empty(1, device=x.device, dtype=torch.int32)
        launch(_fill_zero, (1,), arrived, 1, BLOCK=16)
        launch(
            _fused_layer_norm, (programs,), x, w, b, y, means, m2s, arrived, rows, cols, chunks, eps, keep_items,
            CHUNK=chunk, BLOCK_P=next_power_of_2(chunks), num_warps=cfg["num_warps"], maxnreg=_max_registers(cfg),
            launch_cooperative_grid=True,
        )  # fmt: skip

    key = (cfg["CHUNK"], cfg["num_warps"], cfg["programs_per_sm"], cfg["keep_mb"], eps)
    _GRAPHS.run(body, (x, w, b, y), key)


_GRAPHS = Graphs()  # a call's launches as one graph launch (launch.Graphs)


def layer_norm(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float, variant: str | None = None
) -> torch.Tensor:
    cols = weight.numel()
    if x.shape[x.dim() - weight.dim() :] != weight.shape or bias.shape != weight.shape:
        raise ValueError(f"x {tuple(x.shape)}, weight {tuple(weight.shape)}, bias {tuple(bias.shape)} do not match")
    x, w, b = x.contiguous(), weight.contiguous(), bias.contiguous()
    rows = x.numel() // cols
    y = torch.empty_like(x)
    cfg = VARIANTS[variant or ("interpret" if _INTERPRET else "default")]
    if cfg["mode"] == "fused":
        _launch_fused(x, w, b, y, rows, cols, eps, cfg)
        return y
    if cfg["mode"] != "two_pass":
        if _launch_coop(x, w, b, y, rows, cols, eps, cfg):
            return y
        cfg = VARIANTS["c2048_b2048_w4"]  # rows too long to be held by the GPU at once
    chunk = min(cfg["CHUNK"], cdiv(cols, cfg["BLOCK"]) * cfg["BLOCK"])
    chunks = cdiv(cols, chunk)
    grid = (rows * chunks,)

    def body():
        means = torch.empty(rows * chunks, device=x.device, dtype=torch.float32)
        m2s = torch.empty(rows * chunks, device=x.device, dtype=torch.float32)
        launch(
            _chunk_moments, grid, x, means, m2s, rows, cols, chunks,
            CHUNK=chunk, BLOCK=cfg["BLOCK"], num_warps=cfg["num_warps"],
        )  # fmt: skip
        launch(
            _normalize, grid, x, w, b, y, means, m2s, rows, cols, chunks, eps,
            CHUNK=chunk, BLOCK=cfg["BLOCK"], BLOCK_P=next_power_of_2(chunks), num_warps=cfg["num_warps"],
        )  # fmt: skip

    _GRAPHS.run(body, (x, w, b, y), (variant, eps))
    return y


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        # same submodule name as the reference, so its state_dict (ln.weight, ln.bias) loads strictly
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)
        self.variant: str | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layer_norm(x, self.ln.weight, self.ln.bias, self.ln.eps, self.variant)
