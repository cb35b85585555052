"""Triplet margin loss (p=2, eps 1e-6, mean): per row max(|a - p + eps| - |a - n + eps| + margin, 0), as
``torch.pairwise_distance`` adds eps to the difference. Each program reduces a band of rows over the columns, then
writes the band's loss sum; a one-program kernel adds the partials in a fixed order and divides by the row count."""

import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

try:
    from .launch import Graphs, cdiv, finish_mean, launch  # imported as kernels.triton.<problem>
except ImportError:  # loaded as a file by the harness, with the route directory on sys.path
    from launch import Graphs, cdiv, finish_mean, launch

_INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
_PAIRWISE_EPS = 1e-6

VARIANTS = {
    "default": {"BLOCK_R": 4, "BLOCK_C": 1024, "num_warps": 4},
    "r2_c1024_w4": {"BLOCK_R": 2, "BLOCK_C": 1024, "num_warps": 4},
    "r4_c2048_w8": {"BLOCK_R": 4, "BLOCK_C": 2048, "num_warps": 8},
    "r2_c2048_w4": {"BLOCK_R": 2, "BLOCK_C": 2048, "num_warps": 4},
    "r1_c2048_w4": {"BLOCK_R": 1, "BLOCK_C": 2048, "num_warps": 4},
    "interpret": {"BLOCK_R": 4, "BLOCK_C": 32, "num_warps": 4},
}


@triton.jit
def _triplet_partials(
    a_ptr, p_ptr, n_ptr, partial_ptr, rows, cols, margin, eps, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr
):
    pid = tl.program_id(0)
    r = pid.to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    row_mask = r < rows
    sq_pos = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.float32)
    sq_neg = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.float32)
    for start in range(0, cols, BLOCK_C):
        c = start + tl.arange(0, BLOCK_C)
        mask = row_mask[:, None] & (c < cols)[None, :]
        offs = r[:, None] * cols + c[None, :]
        a = tl.load(a_ptr + offs, mask=mask, other=0.0)
        dp = tl.where(mask, a - tl.load(p_ptr + offs, mask=mask, other=0.0) + eps, 0.0)
        dn = tl.where(mask, a - tl.load(n_ptr + offs, mask=mask, other=0.0) + eps, 0.0)
        sq_pos += dp * dp
        sq_neg += dn * dn
    d_pos = tl.sqrt_rn(tl.sum(sq_pos, axis=1))
    d_neg = tl.sqrt_rn(tl.sum(sq_neg, axis=1))
    loss = tl.where(row_mask, tl.maximum(d_pos - d_neg + margin, 0.0), 0.0)
    tl.store(partial_ptr + pid, tl.sum(loss, axis=0))


_GRAPHS = Graphs()  # the two launches of a call as one graph launch (launch.Graphs)


def triplet_margin_loss(
    anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor, margin: float, variant: str | None = None
) -> torch.Tensor:
    if not (anchor.shape == positive.shape == negative.shape) or anchor.dim() != 2:
        raise ValueError(
            f"anchor {tuple(anchor.shape)}, positive {tuple(positive.shape)}, negative {tuple(negative.shape)}: "
            "need three equal (batch, dim) tensors"
        )
    a, p, n = anchor.contiguous(), positive.contiguous(), negative.contiguous()
    rows, cols = a.shape
    cfg = VARIANTS[variant or ("interpret" if _INTERPRET else "default")]
    programs = cdiv(rows, cfg["BLOCK_R"])
    out = torch.empty((), device=a.device, dtype=torch.float32)

    def body():
        partials = torch.empty(programs, device=a.device, dtype=torch.float32)
        launch(
            _triplet_partials, (programs,), a, p, n, partials, rows, cols, margin, _PAIRWISE_EPS,
            BLOCK_R=cfg["BLOCK_R"], BLOCK_C=cfg["BLOCK_C"], num_warps=cfg["num_warps"],
        )  # fmt: skip
        finish_mean(partials, out, programs, 1.0 / rows)

    _GRAPHS.run(body, (a, p, n, out), (variant, margin))
    return out


class ModelNew(nn.Module):
    def __init__(self, margin: float = 1.0):
        super().__init__()
        self.margin = float(margin)
        self.variant: str | None = None

    def forward(self, anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
        return triplet_margin_loss(anchor, positive, negative, self.margin, self.variant)
