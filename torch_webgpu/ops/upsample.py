"""Upsampling (nearest, nearest-exact, bilinear; 1-d/2-d) and their backwards, separable along each
spatial dim: source indices and weights are tiny host-computed tables (torch's own float32 index
formulas), the data never leaves the device (index_select / index_add kernels)."""

from __future__ import annotations

import torch

from .indexing import _index_add, index_select
from .out_args import write_out
from .registry import register


def _scale(in_size: int, out_size: int, scale, align_corners: bool = False) -> float:
    if align_corners:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    if scale is not None and scale > 0:
        return 1.0 / scale
    return in_size / out_size


def _nearest_index(in_size, out_size, scale, exact: bool) -> torch.Tensor:
    s = torch.tensor(_scale(in_size, out_size, scale), dtype=torch.float32)
    o = torch.arange(out_size, dtype=torch.float32)
    src = torch.floor((o + 0.5) * s) if exact else torch.floor(o * s)
    return src.clamp(max=in_size - 1).to(torch.int32)


def _linear_tables(in_size, out_size, scale, align_corners):
    s = torch.tensor(_scale(in_size, out_size, scale, align_corners), dtype=torch.float32)
    o = torch.arange(out_size, dtype=torch.float32)
    src = o * s if align_corners else ((o + 0.5) * s - 0.5).clamp(min=0)
    i0 = src.to(torch.int32)
    i1 = torch.where(i0 < in_size - 1, i0 + 1, i0)
    l1 = src - i0.to(torch.float32)
    return i0, i1, 1 - l1, l1


def _to(t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    if t.is_floating_point():
        return t.to(device=like.device, dtype=like.dtype)
    return t.to(like.device)


def _weights_shape(w: torch.Tensor, dim: int, nd: int) -> torch.Tensor:
    shape = [1] * nd
    shape[dim] = -1
    return w.reshape(shape)


def _nearest(x, output_size, scales, exact):
    k = len(output_size)
    out = x
    for j in range(k):
        dim = x.dim() - k + j
        idx = _nearest_index(x.shape[dim], output_size[j], scales[j], exact)
        out = index_select(out, dim, _to(idx, x))
    return out


def _nearest_backward(g, input_size, output_size, scales, exact):
    k = len(output_size)
    out = g
    for j in range(k):
        dim = g.dim() - k + j
        idx = _nearest_index(input_size[dim], output_size[j], scales[j], exact)
        shape = list(out.shape)
        shape[dim] = input_size[dim]
        out = _index_add(torch.zeros(shape, dtype=g.dtype, device=g.device), dim, _to(idx, g), out, 1)
    return out


def _linear(x, output_size, align_corners, scales):
    k = len(output_size)
    out = x
    for j in range(k):
        dim = x.dim() - k + j
        i0, i1, l0, l1 = _linear_tables(x.shape[dim], output_size[j], scales[j], align_corners)
        a = index_select(out, dim, _to(i0, x))
        b = index_select(out, dim, _to(i1, x))
        out = a * _to(_weights_shape(l0, dim, x.dim()), x) + b * _to(_weights_shape(l1, dim, x.dim()), x)
    return out


def _linear_backward(g, input_size, output_size, align_corners, scales):
    k = len(output_size)
    out = g
    for j in reversed(range(k)):
        dim = g.dim() - k + j
        i0, i1, l0, l1 = _linear_tables(input_size[dim], output_size[j], scales[j], align_corners)
        shape = list(out.shape)
        shape[dim] = input_size[dim]
        w0 = out * _to(_weights_shape(l0, dim, g.dim()), g)
        w1 = out * _to(_weights_shape(l1, dim, g.dim()), g)
        acc = _index_add(torch.zeros(shape, dtype=g.dtype, device=g.device), dim, _to(i0, g), w0, 1)
        out = _index_add(acc, dim, _to(i1, g), w1, 1)
    return out


def _register_nearest(name: str, k: int, exact: bool) -> None:
    def forward(self, output_size, *scales):
        """aten upsample_nearest forward."""
        return _nearest(self, list(output_size), list(scales) + [None] * (k - len(scales)), exact)

    def backward(grad_output, output_size, input_size, *scales):
        """aten upsample_nearest backward."""
        return _nearest_backward(grad_output, list(input_size), list(output_size),
                                 list(scales) + [None] * (k - len(scales)), exact)

    def forward_out(self, output_size, *scales, out):
        """aten upsample_nearest forward (out=)."""
        r = forward(self, output_size, *scales)
        return write_out(out, r)

    register(name)(forward)
    register(name + ".out")(forward_out)
    register(name + "_backward")(backward)


def _register_linear(name: str, k: int) -> None:
    def forward(self, output_size, align_corners, *scales):
        """aten upsample (bi)linear forward."""
        return _linear(self, list(output_size), align_corners, list(scales) + [None] * (k - len(scales)))

    def backward(grad_output, output_size, input_size, align_corners, *scales):
        """aten upsample (bi)linear backward."""
        return _linear_backward(grad_output, list(input_size), list(output_size), align_corners,
                                list(scales) + [None] * (k - len(scales)))

    def forward_out(self, output_size, align_corners, *scales, out):
        """aten upsample (bi)linear forward (out=)."""
        r = forward(self, output_size, align_corners, *scales)
        return write_out(out, r)

    register(name)(forward)
    register(name + ".out")(forward_out)
    register(name + "_backward")(backward)


_register_nearest("upsample_nearest1d", 1, False)
_register_nearest("upsample_nearest2d", 2, False)
_register_nearest("upsample_nearest3d", 3, False)
_register_nearest("_upsample_nearest_exact1d", 1, True)
_register_nearest("_upsample_nearest_exact3d", 3, True)
_register_nearest("_upsample_nearest_exact2d", 2, True)
_register_linear("upsample_linear1d", 1)
_register_linear("upsample_bilinear2d", 2)
