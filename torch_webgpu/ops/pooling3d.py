"""3-d pooling (max with indices, avg, adaptive avg/max) and backwards, as two passes of the 2-d kernels.

Every 3-d pooling window is a box, so it separates: pass 1 pools (H, W) of each depth slice (planes =
batch * channels * D); pass 2 pools the depth axis, seen as a [planes, D, Ho*Wo] image with a (kd, 1)
window. Max is exact (first max in (d, h, w) order, as the CPU scans), and averages factor too: the divisor
of a box (padding counted or not, ceil mode clipping) is the product of its per-dim counts. Max indices
are D*H*W-flat: pass 2's index gives the depth, pass 1's (gathered at that depth) the h*W + w part.
Max backwards scatter-add the gradient at those indices; avg backwards run the two 2-d backwards in turn.
"""

from __future__ import annotations

import torch

from .out_args import out_variant
from .registry import register

aten = torch.ops.aten


def _three(v, default=None) -> tuple[int, int, int]:
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        return default
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return tuple(v * 3) if len(v) == 1 else tuple(v)


def _check(op: str, x: torch.Tensor) -> None:
    if x.dim() not in (4, 5):
        raise RuntimeError(f"{op}: expected a 4-d or 5-d input, got {x.dim()}-d")


def _geometry(kernel_size, stride, padding, dilation=1):
    k = _three(kernel_size)
    return k, _three(stride, k), _three(padding, (0, 0, 0)), _three(dilation, (1, 1, 1))


def _split(x: torch.Tensor):
    """(planes, D, H, W) of a [..., D, H, W] tensor."""
    d, h, w = x.shape[-3:]
    return x.numel() // max(d * h * w, 1), d, h, w


def _flat_indices(i_depth: torch.Tensor, i_plane: torch.Tensor, hw_out: int, hw_in: int) -> torch.Tensor:
    """D*H*W-flat max indices from pass 2's [P, Do, HoWo] and pass 1's [P, D, HoWo] indices."""
    depth = torch.div(i_depth.to(torch.int32), hw_out, rounding_mode="floor")
    within = torch.gather(i_plane, 1, depth.to(torch.int64)).to(torch.int32)
    return (depth * hw_in + within).to(torch.int64)


def _max(x: torch.Tensor, first, second, out_dhw: tuple[int, int, int] | None = None):
    """Two-pass max: `first(planes)` pools (H, W), `second(image)` pools depth; both return (values, idx)."""
    p, d, h, w = _split(x)
    v1, i1 = first(x.reshape(p * d, h, w))
    ho, wo = v1.shape[-2:]
    v2, i2 = second(v1.reshape(p, d, ho * wo))
    do = v2.shape[1]
    idx = _flat_indices(i2, i1.reshape(p, d, ho * wo), ho * wo, h * w)
    shape = (*x.shape[:-3], do, ho, wo)
    return v2.reshape(shape), idx.reshape(shape)


def _wide(x: torch.Tensor) -> torch.Tensor:
    """float32 for the averaging passes: one rounding at the end, as the CPU's single pass."""
    return x if x.dtype == torch.float32 else x.to(torch.float32)


def _scatter_grad(grad_output: torch.Tensor, x: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    p, d, h, w = _split(x)
    g = torch.zeros((p, d * h * w), dtype=grad_output.dtype, device=x.device)
    g.scatter_add_(1, indices.reshape(p, -1), grad_output.reshape(p, -1))
    return g.reshape(x.shape)


@register("max_pool3d_with_indices")
def max_pool3d_with_indices(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """aten.max_pool3d_with_indices -> (values, int64 D*H*W-flat indices)."""
    _check("max_pool3d", self)
    k, s, p, d = _geometry(kernel_size, stride, padding, dilation)
    depth = ((k[0], 1), (s[0], 1), (p[0], 0), (d[0], 1))
    return _max(self, lambda t: aten.max_pool2d_with_indices(t, k[1:], s[1:], p[1:], d[1:], ceil_mode),
                lambda t: aten.max_pool2d_with_indices(t, *depth, ceil_mode))


@register("max_pool3d_with_indices_backward")
def max_pool3d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode,
                                     indices):
    """aten.max_pool3d_with_indices_backward: the gradient scatter-added at the max indices."""
    return _scatter_grad(grad_output, self, indices)


@register("adaptive_max_pool3d")
def adaptive_max_pool3d(self, output_size):
    """aten.adaptive_max_pool3d -> (values, int64 D*H*W-flat indices)."""
    _check("adaptive_max_pool3d", self)
    od, oh, ow = _three(output_size)
    return _max(self, lambda t: aten.adaptive_max_pool2d(t, (oh, ow)),
                lambda t: aten.adaptive_max_pool2d(t, (od, t.shape[-1])))


@register("adaptive_max_pool3d_backward")
def adaptive_max_pool3d_backward(grad_output, self, indices):
    """aten.adaptive_max_pool3d_backward."""
    return _scatter_grad(grad_output, self, indices)


def _avg_passes(kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    k, s, p, _ = _geometry(kernel_size, stride, padding)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    # with an override both passes sum (divisor 1) and the total is divided once
    div = 1 if divisor_override else None
    return ((k[1:], s[1:], p[1:], ceil_mode, count_include_pad, div),
            ((k[0], 1), (s[0], 1), (p[0], 0), ceil_mode, count_include_pad, div))


@register("avg_pool3d")
def avg_pool3d(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """aten.avg_pool3d."""
    _check("avg_pool3d", self)
    first, second = _avg_passes(kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
    p, d, h, w = _split(self)
    v1 = aten.avg_pool2d(_wide(self).reshape(p * d, h, w), *first)
    ho, wo = v1.shape[-2:]
    v2 = aten.avg_pool2d(v1.reshape(p, d, ho * wo), *second)
    out = v2.reshape(*self.shape[:-3], v2.shape[1], ho, wo)
    return (out / divisor_override if divisor_override else out).to(self.dtype)


def _avg_backward(grad_output, self, first, second, scale) -> torch.Tensor:
    """The two 2-d backwards in reverse order (`first`/`second`: extra args of each 2-d backward)."""
    p, d, h, w = _split(self)
    do, ho, wo = grad_output.shape[-3:]
    g2 = grad_output.reshape(p, do, ho * wo)
    if scale is not None:
        g2 = g2 / scale
    mid = torch.empty((p, d, ho * wo), dtype=self.dtype, device=self.device)  # its shape is what counts
    g1 = second(g2, mid)
    return first(g1.reshape(p * d, ho, wo), self.reshape(p * d, h, w)).reshape(self.shape)


@register("avg_pool3d_backward")
def avg_pool3d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                        divisor_override):
    """aten.avg_pool3d_backward."""
    first, second = _avg_passes(kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
    return _avg_backward(grad_output, self, lambda g, x: aten.avg_pool2d_backward(g, x, *first),
                         lambda g, x: aten.avg_pool2d_backward(g, x, *second), divisor_override)


@register("_adaptive_avg_pool3d")
def adaptive_avg_pool3d(self, output_size):
    """aten._adaptive_avg_pool3d."""
    _check("adaptive_avg_pool3d", self)
    od, oh, ow = _three(output_size)
    p, d, h, w = _split(self)
    v1 = aten._adaptive_avg_pool2d(_wide(self).reshape(p * d, h, w), (oh, ow))
    v2 = aten._adaptive_avg_pool2d(v1.reshape(p, d, oh * ow), (od, oh * ow))
    return v2.reshape(*self.shape[:-3], od, oh, ow).to(self.dtype)


@register("_adaptive_avg_pool3d_backward")
def adaptive_avg_pool3d_backward(grad_output, self):
    """aten._adaptive_avg_pool3d_backward."""
    return _avg_backward(grad_output, self, aten._adaptive_avg_pool2d_backward,
                         aten._adaptive_avg_pool2d_backward, None)


# out= overloads: the functional kernel's results written into the given tensors
register("max_pool3d_with_indices.out")(out_variant(max_pool3d_with_indices, "out", "indices"))
register("max_pool3d_with_indices_backward.grad_input")(
    out_variant(max_pool3d_with_indices_backward, "grad_input"))
register("adaptive_max_pool3d.out")(out_variant(adaptive_max_pool3d, "out", "indices"))
register("adaptive_max_pool3d_backward.grad_input")(out_variant(adaptive_max_pool3d_backward, "grad_input"))
register("avg_pool3d.out")(out_variant(avg_pool3d, "out"))
register("avg_pool3d_backward.grad_input")(out_variant(avg_pool3d_backward, "grad_input"))
register("_adaptive_avg_pool3d.out")(out_variant(adaptive_avg_pool3d, "out"))
register("_adaptive_avg_pool3d_backward.out")(out_variant(adaptive_avg_pool3d_backward, "out"))
