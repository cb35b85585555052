"""LayerNorm over the trailing ``normalized_shape`` dims with weight and bias (``nn.LayerNorm``).

A row here is 4M floats (16 MB), far more than one program can hold, so each row is cut into chunks:
1. ``_chunk_moments``: each program writes its chunk's mean and sum of squared deviations (computed per tile around
   the tile's own mean and merged with Chan's formula, so no catastrophic cancellation of E[x^2] - E[x]^2);
2. ``_normalize``: each program merges its row's chunk moments into the row mean and variance, then writes
   (x - mean) * rstd * weight + bias for its chunk. It walks the chunks in the reverse order of step 1 so its first
   reads find the last chunks of step 1 still in L2, and both walk chunk-major (all rows of chunk 0, then chunk 1,
   ...) so that each weight and bias chunk comes from HBM once and from L2 for the other rows.
"""

import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"

VARIANTS = {
    "default": {"CHUNK": 4096, "BLOCK": 2048, "num_warps": 4},
    "c2048_b2048_w4": {"CHUNK": 2048, "BLOCK": 2048, "num_warps": 4},
    "c4096_b4096_w8": {"CHUNK": 4096, "BLOCK": 4096, "num_warps": 8},
    "c8192_b2048_w4": {"CHUNK": 8192, "BLOCK": 2048, "num_warps": 4},
    "interpret": {"CHUNK": 256, "BLOCK": 64, "num_warps": 4},
}


@triton.jit
def _chunk_moments(x_ptr, mean_ptr, m2_ptr, rows, cols, num_chunks, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    # chunk-major order, as in _normalize
    chunk = tl.program_id(0) // rows
    row = tl.program_id(0) % rows
    chunk_start = chunk * CHUNK
    row_start = row.to(tl.int64) * cols
    count = 0.0
    mean = 0.0
    m2 = 0.0
    for off in range(0, CHUNK, BLOCK):
        c = chunk_start + off + tl.arange(0, BLOCK)
        mask = c < cols
        x = tl.load(x_ptr + row_start + c, mask=mask, other=0.0)
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
    # merge the row's chunk moments: every chunk but the last holds CHUNK elements
    i = tl.arange(0, BLOCK_P)
    i_mask = i < num_chunks
    counts = tl.where(i_mask, tl.minimum(cols - i * CHUNK, CHUNK), 0).to(tl.float32)
    means = tl.load(mean_ptr + row * num_chunks + i, mask=i_mask, other=0.0)
    m2s = tl.load(m2_ptr + row * num_chunks + i, mask=i_mask, other=0.0)
    mean = tl.sum(counts * means, axis=0) / cols
    dev = tl.where(i_mask, means - mean, 0.0)
    var = (tl.sum(m2s, axis=0) + tl.sum(counts * dev * dev, axis=0)) / cols
    rstd = 1.0 / tl.sqrt_rn(var + eps)
    row_start = row.to(tl.int64) * cols
    for off in range(0, CHUNK, BLOCK):
        c = chunk_start + off + tl.arange(0, BLOCK)
        mask = c < cols
        x = tl.load(x_ptr + row_start + c, mask=mask, other=0.0)
        w = tl.load(w_ptr + c, mask=mask, other=0.0)
        b = tl.load(b_ptr + c, mask=mask, other=0.0)
        tl.store(y_ptr + row_start + c, (x - mean) * rstd * w + b, mask=mask)


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
    chunk = min(cfg["CHUNK"], triton.cdiv(cols, cfg["BLOCK"]) * cfg["BLOCK"])
    chunks = triton.cdiv(cols, chunk)
    means = torch.empty(rows * chunks, device=x.device, dtype=torch.float32)
    m2s = torch.empty(rows * chunks, device=x.device, dtype=torch.float32)
    grid = (rows * chunks,)
    _chunk_moments[grid](x, means, m2s, rows, cols, chunks, CHUNK=chunk, BLOCK=cfg["BLOCK"], num_warps=cfg["num_warps"])
    _normalize[grid](
        x, w, b, y, means, m2s, rows, cols, chunks, eps,
        CHUNK=chunk, BLOCK=cfg["BLOCK"], BLOCK_P=triton.next_power_of_2(chunks), num_warps=cfg["num_warps"],
    )  # fmt: skip
    return y


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        # same submodule name as the reference, so its state_dict (ln.weight, ln.bias) loads strictly
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)
        self.variant: str | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layer_norm(x, self.ln.weight, self.ln.bias, self.ln.eps, self.variant)
