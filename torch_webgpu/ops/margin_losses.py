"""multi_margin_loss and multilabel_margin_loss composed from device gathers, masks and reductions."""

from __future__ import annotations

import torch

from .losses import reduce_loss
from .out_args import write_out
from .registry import register


@register("multi_margin_loss")
def multi_margin_loss(self, target, p=1, margin=1, weight=None, reduction=1):
    """aten.multi_margin_loss: sum_{j != y} max(0, margin - x[y] + x[j])^p * w[y] / C per sample."""
    if p not in (1, 2):
        raise RuntimeError("only p == 1 and p == 2 supported")
    x = self if self.dim() == 2 else self.reshape(1, -1)
    n, c = x.shape
    t = target.reshape(-1).to(torch.int64)
    if t.numel() != n:
        raise RuntimeError(f"inconsistent target size, expected {n} but got {list(target.shape)}")
    if n and bool(((t < 0) | (t >= c)).any().item()):
        raise IndexError(f"multi_margin_loss: target out of range for {c} classes")
    xy = x.gather(1, t.unsqueeze(1))
    z = (margin - xy + x).clamp_min(0)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * weight.index_select(0, t).unsqueeze(1).to(z.dtype)
    is_target = torch.arange(c, device=x.device).unsqueeze(0) == t.unsqueeze(1)
    loss = z.masked_fill(is_target, 0).sum(1) / c
    if self.dim() < 2 and reduction == 0:
        loss = loss.reshape(target.shape if target.dim() else ())
    return reduce_loss(loss, reduction)


@register("multi_margin_loss.out")
def multi_margin_loss_out(self, target, p=1, margin=1, weight=None, reduction=1, *, out):
    """aten.multi_margin_loss (out=)."""
    return write_out(out, multi_margin_loss(self, target, p, margin, weight, reduction))


@register("multilabel_margin_loss_forward")
def multilabel_margin_loss_forward(self, target, reduction):
    """aten.multilabel_margin_loss_forward -> (loss, is_target); targets end at the first -1 of a row."""
    x = self if self.dim() == 2 else self.reshape(1, -1)
    n, c = x.shape
    t = target.reshape(n, c).to(torch.int64)
    valid = (t == -1).to(torch.int32).cumsum(1) == 0
    if n and bool(((valid & ((t < 0) | (t >= c)))).any().item()):
        raise IndexError(f"multilabel_margin_loss: target out of range for {c} classes")
    tc = torch.where(valid, t, torch.zeros_like(t))
    marks = torch.zeros((n, c), dtype=torch.float32, device=x.device)
    marks.scatter_add_(1, tc, valid.to(torch.float32))
    is_target = marks > 0
    xt = x.gather(1, tc)  # (n, c): x at each listed target
    hinge = (1 - (xt.unsqueeze(2) - x.unsqueeze(1))).clamp_min(0)  # [i, k, j]
    keep = valid.unsqueeze(2) & ~is_target.unsqueeze(1)
    loss = (hinge * keep.to(hinge.dtype)).sum((1, 2)) / c
    is_target_out = is_target.to(self.dtype).reshape(self.shape)
    if self.dim() < 2:
        loss = loss.reshape(())
    return reduce_loss(loss, reduction), is_target_out


@register("multilabel_margin_loss_forward.output")
def multilabel_margin_loss_forward_out(self, target, reduction, *, output, is_target):
    """aten.multilabel_margin_loss_forward (out=)."""
    loss, marks = multilabel_margin_loss_forward(self, target, reduction)
    return write_out(output, loss), write_out(is_target, marks)
