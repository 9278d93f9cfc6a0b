"""Aten 2-d pooling (max with indices, avg, adaptive avg) and their backwards; 1-d variants reach these
through aten's composites."""

from __future__ import annotations

import torch

from .codegen.pooling import launch_pool
from .elementwise import operand
from .out_args import out_variant
from .reductions import cast_into
from .registry import register
from .tensor_buffers import buffer_id, new_empty


def _two(v, default=None) -> tuple[int, int]:
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        return default
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return (v[0], v[0]) if len(v) == 1 else (v[0], v[1])


def _out_size(size, k, s, p, d, ceil_mode) -> int:
    num = size + 2 * p - d * (k - 1) - 1
    out = (-(-num // s) if ceil_mode else num // s) + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _planes(x: torch.Tensor) -> torch.Tensor:
    if x.dim() not in (3, 4):
        raise RuntimeError(f"pooling expects a 3-d or 4-d input, got {x.dim()}-d")
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"webgpu: pooling supports float32/float16/bfloat16, got {x.dtype}")
    return x.reshape(-1, x.shape[-2], x.shape[-1])


def _geom(x, k, s, p, d, ceil_mode):
    k = _two(k)
    s = _two(s, k)
    p = _two(p, (0, 0))
    d = _two(d, (1, 1))
    if p[0] > k[0] // 2 or p[1] > k[1] // 2:
        raise RuntimeError("pad should be at most half of effective kernel size, but got pad="
                           f"{p[0]}, kernel_size={k[0]} and dilation={d[0]}")
    h, w = x.shape[-2], x.shape[-1]
    oh, ow = _out_size(h, k[0], s[0], p[0], d[0], ceil_mode), _out_size(w, k[1], s[1], p[1], d[1], ceil_mode)
    if oh <= 0 or ow <= 0:
        raise RuntimeError(f"Given input size: ({x.shape[-3]}x{h}x{w}). Calculated output size: "
                           f"({x.shape[-3]}x{oh}x{ow}). Output size is too small")
    return k, s, p, d, oh, ow


def _finish(t: torch.Tensor, shape, dtype) -> torch.Tensor:
    t = t.reshape(shape)
    return t if dtype == torch.float32 else cast_into(t, new_empty(shape, dtype, t))


@register("max_pool2d_with_indices")
def max_pool2d_with_indices(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """aten.max_pool2d_with_indices -> (values, int64 flat indices)."""
    x = _planes(self)
    k, s, p, d, oh, ow = _geom(self, kernel_size, stride, padding, dilation, ceil_mode)
    planes = x.shape[0]
    out = new_empty((planes, oh, ow), torch.float32, self)
    idx = new_empty((planes, oh, ow), torch.int64, self)
    geometry = [planes, x.shape[1], x.shape[2], oh, ow, *k, *s, *p, *d, 0, 0]
    launch_pool("max", operand(x), buffer_id(out), geometry, out.numel(), (buffer_id(idx),))
    shape = (*self.shape[:-2], oh, ow)
    return _finish(out, shape, self.dtype), idx.reshape(shape)


@register("max_pool2d_with_indices_backward")
def max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode,
                                     indices):
    """aten.max_pool2d_with_indices_backward."""
    x = _planes(self)
    k, s, p, d, oh, ow = _geom(self, kernel_size, stride, padding, dilation, ceil_mode)
    g = grad_output.contiguous()
    idx = indices.contiguous()
    gi = new_empty(x.shape, torch.float32, self)
    geometry = [x.shape[0], x.shape[1], x.shape[2], oh, ow, *k, *s, *p, *d, 0, 0]
    launch_pool("max_bwd", operand(x), buffer_id(gi), geometry, gi.numel(), (buffer_id(g), buffer_id(idx)),
                g.dtype)
    return _finish(gi, self.shape, self.dtype)


def _avg_geometry(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    k, s, p, d, oh, ow = _geom(self, kernel_size, stride, padding, 1, ceil_mode)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    x = _planes(self)
    flags = [int(bool(count_include_pad)), int(divisor_override or 0)]
    return x, oh, ow, [x.shape[0], x.shape[1], x.shape[2], oh, ow, *k, *s, *p, 1, 1, *flags]


@register("avg_pool2d")
def avg_pool2d(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """aten.avg_pool2d."""
    x, oh, ow, geometry = _avg_geometry(self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                        divisor_override)
    out = new_empty((x.shape[0], oh, ow), torch.float32, self)
    launch_pool("avg", operand(x), buffer_id(out), geometry, out.numel())
    return _finish(out, (*self.shape[:-2], oh, ow), self.dtype)


@register("avg_pool2d_backward")
def avg_pool2d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                        divisor_override):
    """aten.avg_pool2d_backward."""
    x, oh, ow, geometry = _avg_geometry(self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                        divisor_override)
    g = grad_output.contiguous()
    gi = new_empty(x.shape, torch.float32, self)
    launch_pool("avg_bwd", operand(x), buffer_id(gi), geometry, gi.numel(), (buffer_id(g),), g.dtype)
    return _finish(gi, self.shape, self.dtype)


@register("_adaptive_avg_pool2d")
def adaptive_avg_pool2d(self, output_size):
    """aten._adaptive_avg_pool2d."""
    x = _planes(self)
    oh, ow = _two(output_size)
    if x.shape[1] == 0 or x.shape[2] == 0:
        raise RuntimeError("adaptive_avg_pool2d(): Expected input to have non-zero size for non-batch "
                           "dimensions")
    out = new_empty((x.shape[0], oh, ow), torch.float32, self)
    geometry = [x.shape[0], x.shape[1], x.shape[2], oh, ow] + [0] * 10
    launch_pool("adaptive_avg", operand(x), buffer_id(out), geometry, out.numel())
    return _finish(out, (*self.shape[:-2], oh, ow), self.dtype)


@register("_adaptive_avg_pool2d_backward")
def adaptive_avg_pool2d_backward(grad_output, self):
    """aten._adaptive_avg_pool2d_backward."""
    x = _planes(self)
    oh, ow = grad_output.shape[-2], grad_output.shape[-1]
    g = grad_output.contiguous()
    gi = new_empty(x.shape, torch.float32, self)
    geometry = [x.shape[0], x.shape[1], x.shape[2], oh, ow] + [0] * 10
    launch_pool("adaptive_avg_bwd", operand(x), buffer_id(gi), geometry, gi.numel(), (buffer_id(g),), g.dtype)
    return _finish(gi, self.shape, self.dtype)


@register("adaptive_max_pool2d")
def adaptive_max_pool2d(self, output_size):
    """aten.adaptive_max_pool2d -> (values, int64 flat indices)."""
    x = _planes(self)
    oh, ow = _two(output_size)
    out = new_empty((x.shape[0], oh, ow), torch.float32, self)
    idx = new_empty((x.shape[0], oh, ow), torch.int64, self)
    geometry = [x.shape[0], x.shape[1], x.shape[2], oh, ow] + [0] * 10
    launch_pool("adaptive_max", operand(x), buffer_id(out), geometry, out.numel(), (buffer_id(idx),))
    shape = (*self.shape[:-2], oh, ow)
    return _finish(out, shape, self.dtype), idx.reshape(shape)


@register("adaptive_max_pool2d_backward")
def adaptive_max_pool2d_backward(grad_output, self, indices):
    """aten.adaptive_max_pool2d_backward."""
    x = _planes(self)
    oh, ow = grad_output.shape[-2], grad_output.shape[-1]
    g, idx = grad_output.contiguous(), indices.contiguous()
    gi = new_empty(x.shape, torch.float32, self)
    geometry = [x.shape[0], x.shape[1], x.shape[2], oh, ow] + [0] * 10
    launch_pool("adaptive_max_bwd", operand(x), buffer_id(gi), geometry, gi.numel(),
                (buffer_id(g), buffer_id(idx)), g.dtype)
    return _finish(gi, self.shape, self.dtype)


# out= overloads: the functional kernel's results written into the given tensors
register("max_pool2d_with_indices.out")(out_variant(max_pool2d_with_indices, "out", "indices"))
register("avg_pool2d.out")(out_variant(avg_pool2d, "out"))
register("adaptive_max_pool2d.out")(out_variant(adaptive_max_pool2d, "out", "indices"))
