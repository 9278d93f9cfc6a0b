"""cdist / pdist: p-norm distances between rows, from broadcast differences and a last-dim reduction.

The CPU computes p=2 through matmuls only past 25 rows (compute_mode None); the direct form used here is
the more accurate one and what the CPU uses for the small shapes; both agree within float32 tolerance.
"""

from __future__ import annotations

import math

import torch

from .out_args import write_out
from .registry import register


def _pnorm_last(d: torch.Tensor, p: float) -> torch.Tensor:
    """The p-norm over the last dim of non-negative differences d."""
    if p == 0:
        return (d != 0).to(d.dtype).sum(-1)
    if p == 1:
        return d.sum(-1)
    if p == 2:
        return (d * d).sum(-1).sqrt()
    if math.isinf(p):
        return d.amax(-1) if d.shape[-1] else d.sum(-1)
    return d.pow(p).sum(-1).pow(1.0 / p)


@register("_cdist_forward")
def cdist_forward(x1, x2, p, compute_mode=None):
    """aten._cdist_forward: (..., P, M) x (..., R, M) -> (..., P, R)."""
    if p < 0:
        raise RuntimeError(f"cdist only supports non-negative p values, got {p}")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: "
                           f"{x2.shape[-1]}")
    batch = torch.broadcast_shapes(x1.shape[:-2], x2.shape[:-2])
    a = x1.expand(*batch, *x1.shape[-2:]).unsqueeze(-2)
    b = x2.expand(*batch, *x2.shape[-2:]).unsqueeze(-3)
    if x1.shape[-2] == 0 or x2.shape[-2] == 0:
        return torch.zeros((*batch, x1.shape[-2], x2.shape[-2]), dtype=x1.dtype, device=x1.device)
    return _pnorm_last((a - b).abs(), p)


@register("_cdist_forward.out")
def cdist_forward_out(x1, x2, p, compute_mode=None, *, out):
    """aten._cdist_forward (out=)."""
    return write_out(out, cdist_forward(x1, x2, p, compute_mode))


@register("_pdist_forward")
def pdist_forward(self, p=2.0):
    """aten._pdist_forward: distances of row pairs i < j, in row-major order."""
    if self.dim() != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {self.dim()}D")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    n = self.shape[0]
    if n < 2:
        return torch.empty(0, dtype=self.dtype, device=self.device)
    # the pair list depends on n only: built on the host like any index constant
    i, j = torch.triu_indices(n, n, 1)
    a = self.index_select(0, i.to(self.device))
    b = self.index_select(0, j.to(self.device))
    return _pnorm_last((a - b).abs(), p)


@register("_pdist_forward.out")
def pdist_forward_out(self, p=2.0, *, out):
    """aten._pdist_forward (out=)."""
    return write_out(out, pdist_forward(self, p))
