"""Loss ops composed from webgpu kernels: smooth_l1 / huber (+backward), binary_cross_entropy
(+backward), binary_cross_entropy_with_logits."""

from __future__ import annotations

import torch

from .out_args import write_out
from .registry import register


def reduce_loss(x: torch.Tensor, reduction: int) -> torch.Tensor:
    """A loss's elementwise values reduced as aten's `reduction` enum says (0 none, 1 mean, 2 sum)."""
    if reduction == 1:
        return x.mean()
    if reduction == 2:
        return x.sum()
    return x


def _out(fn):
    def out_variant(*args, out, **kwargs):
        r = fn(*args, **kwargs)
        return write_out(out, r)

    out_variant.__doc__ = f"{fn.__doc__} (out=)"
    return out_variant


@register("smooth_l1_loss")
def smooth_l1_loss(self, target, reduction=1, beta=1.0):
    """aten.smooth_l1_loss."""
    d = (self - target).abs()
    if beta == 0:
        return reduce_loss(d, reduction)
    return reduce_loss(torch.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta), reduction)


register("smooth_l1_loss.out")(_out(smooth_l1_loss))


@register("smooth_l1_loss_backward")
def smooth_l1_loss_backward(grad_output, self, target, reduction, beta):
    """aten.smooth_l1_loss_backward."""
    d = self - target
    norm = 1.0 / d.numel() if reduction == 1 and d.numel() else 1.0
    if beta == 0:
        g = d.sign()
    else:
        g = torch.where(d.abs() < beta, d / beta, d.sign())
    return g * grad_output * norm


@register("huber_loss")
def huber_loss(self, target, reduction=1, delta=1.0):
    """aten.huber_loss."""
    d = (self - target).abs()
    return reduce_loss(torch.where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta)), reduction)


register("huber_loss.out")(_out(huber_loss))


@register("huber_loss_backward")
def huber_loss_backward(grad_output, self, target, reduction, delta):
    """aten.huber_loss_backward."""
    d = self - target
    norm = 1.0 / d.numel() if reduction == 1 and d.numel() else 1.0
    g = torch.where(d.abs() <= delta, d, delta * d.sign())
    return g * grad_output * norm


@register("binary_cross_entropy")
def binary_cross_entropy(self, target, weight=None, reduction=1):
    """aten.binary_cross_entropy (log clamped at -100, as on the CPU)."""
    loss = -(target * self.log().clamp_min(-100) + (1 - target) * (1 - self).log().clamp_min(-100))
    if weight is not None:
        loss = loss * weight
    return reduce_loss(loss, reduction)


register("binary_cross_entropy.out")(_out(binary_cross_entropy))


@register("binary_cross_entropy_backward")
def binary_cross_entropy_backward(grad_output, self, target, weight=None, reduction=1):
    """aten.binary_cross_entropy_backward."""
    g = grad_output * (self - target) / ((1 - self) * self).clamp_min(1e-12)
    if weight is not None:
        g = g * weight
    if reduction == 1 and self.numel():
        g = g / self.numel()
    return g


@register("binary_cross_entropy_with_logits")
def binary_cross_entropy_with_logits(self, target, weight=None, pos_weight=None, reduction=1):
    """aten.binary_cross_entropy_with_logits (numerically stable form)."""
    log_sig_neg = torch.nn.functional.softplus(-self)  # -log(sigmoid(x))
    if pos_weight is not None:
        lw = 1 + (pos_weight - 1) * target
        loss = (1 - target) * self + lw * log_sig_neg
    else:
        loss = (1 - target) * self + log_sig_neg
    if weight is not None:
        loss = loss * weight
    return reduce_loss(loss, reduction)


@register("log_sigmoid_forward")
def log_sigmoid_forward(self):
    """aten.log_sigmoid_forward -> (output, buffer): log(sigmoid(x)) = -softplus(-x)."""
    return -torch.nn.functional.softplus(-self), torch.empty(0, dtype=self.dtype, device=self.device)


@register("log_sigmoid_backward")
def log_sigmoid_backward(grad_output, self, buffer):
    """aten.log_sigmoid_backward: grad * sigmoid(-x)."""
    return grad_output * torch.sigmoid(-self)
