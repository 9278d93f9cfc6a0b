"""mode along a dim: a stable device sort, run lengths from a running max of run starts, and the first
(smallest) value with the longest run; its index is the run's last (largest) original index, as on the CPU."""

from __future__ import annotations

import torch

from .registry import register


@register("mode")
def mode(self, dim=-1, keepdim=False):
    """aten.mode -> (values, indices)."""
    if self.dim() == 0:
        return self.clone(), torch.zeros((), dtype=torch.int64, device=self.device)
    dim = dim % self.dim()
    n = self.shape[dim]
    if n == 0:
        raise IndexError(f"mode(): Expected reduction dim {dim} to have non-zero size.")
    x = self.movedim(dim, -1)
    key = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    vals, order = torch.sort(key, dim=-1, stable=True)
    pos = torch.arange(n, dtype=torch.float32, device=self.device).expand(vals.shape)
    new_run = torch.ones(vals.shape, dtype=torch.bool, device=self.device)
    if n > 1:
        new_run[..., 1:] = vals[..., 1:] != vals[..., :-1]
    start = torch.where(new_run, pos, torch.zeros_like(pos)).cummax(-1).values
    freq = pos - start + 1
    # a run's length is known at its last element; earlier elements of the run have smaller counts, so the
    # first position reaching the maximum count is the end of the first (smallest-valued) longest run
    best = (freq == freq.amax(-1, keepdim=True)).to(torch.int32).argmax(-1, keepdim=True)
    values = vals.gather(-1, best).to(self.dtype)
    indices = order.gather(-1, best)
    if not keepdim:
        values, indices = values.squeeze(-1), indices.squeeze(-1)
    else:
        values, indices = values.movedim(-1, dim), indices.movedim(-1, dim)
    return values, indices


@register("mode.values")
def mode_out(self, dim=-1, keepdim=False, *, values, indices):
    """aten.mode (out=)."""
    v, i = mode(self, dim, keepdim)
    values.resize_(v.shape).copy_(v)
    indices.resize_(i.shape).copy_(i)
    return values, indices
