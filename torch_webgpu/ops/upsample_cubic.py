"""Bicubic (2-d) and trilinear (3-d) upsampling, separable like ops/upsample.py: per spatial dim a tiny
host table of source taps and weights (torch's float32 index formulas) drives index_select kernels.

Like the CPU's generic N-d kernel, the innermost dim is interpolated first, the weights are stored in the
input dtype, and the arithmetic runs in float32 with one rounding at the end (what float16 can tell apart).
"""

from __future__ import annotations

import torch

from .indexing import index_select
from .out_args import write_out
from .registry import register
from .upsample import _linear_backward, _linear_tables, _scale, _to, _weights_shape

_A = -0.75  # torch's bicubic convolution constant


def _cubic_tables(in_size: int, out_size: int, scale, align_corners: bool):
    """Four clamped source indices and their cubic-convolution weights per output position."""
    s = torch.tensor(_scale(in_size, out_size, scale, align_corners), dtype=torch.float32)
    o = torch.arange(out_size, dtype=torch.float32)
    real = o * s if align_corners else (o + 0.5) * s - 0.5
    base = torch.floor(real)
    t = real - base
    base = base.to(torch.int64)

    def near(x):  # |x| <= 1
        return ((_A + 2) * x - (_A + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((_A * x - 5 * _A) * x + 8 * _A) * x - 4 * _A

    weights = [far(t + 1), near(t), near(1 - t), far(2 - t)]
    taps = [(base + k - 1).clamp(0, in_size - 1).to(torch.int32) for k in range(4)]
    return taps, weights


def _separable(x, output_size, tables):
    """Interpolate the last len(output_size) dims, innermost first; tables(j) -> (taps, weights)."""
    out = x.float()
    nd, k = x.dim(), len(output_size)
    for j in reversed(range(k)):
        dim = nd - k + j
        taps, weights = tables(j)
        acc = None
        for idx, w in zip(taps, weights, strict=True):
            w = _weights_shape(w.to(x.dtype), dim, nd).to(device=x.device, dtype=torch.float32)
            term = index_select(out, dim, _to(idx, out)) * w
            acc = term if acc is None else acc + term
        out = acc
    return out.to(x.dtype)


def _bicubic(x, output_size, align_corners, scales):
    return _separable(x, output_size, lambda j: _cubic_tables(x.shape[x.dim() - 2 + j], output_size[j],
                                                              scales[j], align_corners))


def _trilinear(x, output_size, align_corners, scales):
    def tables(j):
        i0, i1, l0, l1 = _linear_tables(x.shape[x.dim() - 3 + j], output_size[j], scales[j], align_corners)
        return (i0, i1), (l0, l1)

    return _separable(x, output_size, tables)


@register("upsample_bicubic2d")
def upsample_bicubic2d(self, output_size, align_corners, scales_h=None, scales_w=None):
    """aten.upsample_bicubic2d (N, C, H, W)."""
    if self.dim() != 4:
        raise RuntimeError(f"upsample_bicubic2d expects a 4-D input, got {self.dim()}-D")
    return _bicubic(self, list(output_size), align_corners, [scales_h, scales_w])


@register("upsample_bicubic2d.out")
def upsample_bicubic2d_out(self, output_size, align_corners, scales_h=None, scales_w=None, *, out):
    """aten.upsample_bicubic2d (out=)."""
    return write_out(out, upsample_bicubic2d(self, output_size, align_corners, scales_h, scales_w))


@register("upsample_trilinear3d")
def upsample_trilinear3d(self, output_size, align_corners, scales_d=None, scales_h=None, scales_w=None):
    """aten.upsample_trilinear3d (N, C, D, H, W)."""
    if self.dim() != 5:
        raise RuntimeError(f"upsample_trilinear3d expects a 5-D input, got {self.dim()}-D")
    return _trilinear(self, list(output_size), align_corners, [scales_d, scales_h, scales_w])


@register("upsample_trilinear3d.out")
def upsample_trilinear3d_out(self, output_size, align_corners, scales_d=None, scales_h=None, scales_w=None,
                             *, out):
    """aten.upsample_trilinear3d (out=)."""
    r = upsample_trilinear3d(self, output_size, align_corners, scales_d, scales_h, scales_w)
    return write_out(out, r)


@register("upsample_trilinear3d_backward")
def upsample_trilinear3d_backward(grad_output, output_size, input_size, align_corners, scales_d=None,
                                  scales_h=None, scales_w=None):
    """aten.upsample_trilinear3d_backward."""
    g = _linear_backward(grad_output.float(), list(input_size), list(output_size), align_corners,
                         [scales_d, scales_h, scales_w])
    return g.to(grad_output.dtype)
