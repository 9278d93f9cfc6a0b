"""Aten convolution and convolution_backward (1-d and 2-d, grouped, strided, dilated, transposed).

Forward f32/f16 convolutions (and transposed ones) run on the kernel library's implicit GEMM
(kernels/conv.py) with the bias fused; bfloat16 and the backward pass use the same family's direct
kernels (`DirectConvProblem`); 3-d inputs go to ops/conv3d.py (sums of 2-d convolutions)."""

from __future__ import annotations

import torch

from ..kernels.conv import DIRECT_FAMILY, FAMILY, Conv2dProblem, DirectConvProblem, Strided1, Strided4
from . import conv3d
from .codegen.dtypes import storage_name
from .library_launch import library_dtype, run_family
from .reductions import cast_into
from .registry import register
from .tensor_buffers import buffer_id, new_empty


def _pair(v, n: int) -> tuple[int, int]:
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    if len(v) == 1:
        v = v * n
    return (1, v[0]) if n == 1 else (v[0], v[1])


def _geometry(input, weight, stride, padding, dilation, output_padding):  # noqa: A002
    nd = input.dim() - 2
    if nd not in (1, 2):
        raise NotImplementedError(f"webgpu: convolution supports 1-d, 2-d and 3-d inputs, got a "
                                  f"{input.dim()}-d input")
    s, p, d = _pair(stride, nd), _pair(padding, nd), _pair(dilation, nd)
    op = _pair(output_padding, nd) if output_padding is not None else (0, 0)
    if nd == 1:
        p, op = (0, p[1]), (0, op[1])
    return nd, s, p, d, op


def _as4(t: torch.Tensor, nd: int) -> torch.Tensor:
    return t.unsqueeze(2) if nd == 1 else t


def _run(kind, a, b, shape, s, p, d, k, ig, og, dtype, bias=None, like=None) -> torch.Tensor:
    """A direct convolution kernel (`kind`: fwd, data, wgrad) into a new f32 tensor of `shape`, cast to
    `dtype`."""
    out = new_empty(shape, torch.float32, like)
    problem = DirectConvProblem(
        kind, tuple(shape), _strided4(a), tuple(a.shape), _strided4(b), tuple(b.shape), s, p, d, k, ig, og,
        storage_name(a.dtype, "convolution"), storage_name(b.dtype, "convolution"),
        None if bias is None else Strided1(bias.storage_offset(), bias.stride()[0]),
        None if bias is None else storage_name(bias.dtype, "convolution"))
    operands = {"a": buffer_id(a), "b": buffer_id(b), "out": buffer_id(out)}
    if bias is not None:
        operands["bias"] = buffer_id(bias)
    run_family(DIRECT_FAMILY, problem, operands, out, tune=False)
    if dtype != torch.float32:
        out = cast_into(out, new_empty(shape, dtype, like))
    return out


def _check(op: str, *tensors) -> None:
    for t in tensors:
        if t is not None and t.dtype not in (torch.float32, torch.float16, torch.bfloat16):
            raise TypeError(f"webgpu: '{op}' supports float32/float16/bfloat16, got {t.dtype}")


def _strided4(t: torch.Tensor) -> Strided4:
    return Strided4(t.storage_offset(), tuple(t.stride()))


def _library_forward(x, w, bias, s, p, d, groups, transposed, opad, shape) -> torch.Tensor | None:
    """The forward convolution on the library's kernels, or None where it does not apply."""
    dtype = library_dtype(x, w, bias)
    if dtype is None or min(*x.shape, *w.shape, *shape) == 0:
        return None
    n, c, h, wd = x.shape
    out = new_empty(shape, x.dtype, x)
    problem = Conv2dProblem(n=n, cin=c, h=h, w=wd, cout=shape[1], kh=w.shape[2], kw=w.shape[3], stride=s,
                            padding=p, dilation=d, groups=groups, transposed=transposed,
                            output_padding=opad, dtype=dtype, x=_strided4(x), weight=_strided4(w),
                            out=_strided4(out),
                            bias=None if bias is None else Strided1(bias.storage_offset(), bias.stride()[0]))
    tensors = {"x": x, "weight": w, "out": out} | ({"bias": bias} if bias is not None else {})
    run_family(FAMILY, problem, {role: buffer_id(t) for role, t in tensors.items()}, out, tune=False)
    return out


@register("convolution")
def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):  # noqa: A002
    """aten.convolution (conv1d/conv2d/conv3d and transposed)."""
    _check("convolution", input, weight, bias)
    if input.dim() == 5:
        return conv3d.convolution3d(input, weight, bias, stride, padding, dilation, transposed,
                                    output_padding, groups)
    nd, s, p, d, opad = _geometry(input, weight, stride, padding, dilation, output_padding)
    x, w = _as4(input, nd), _as4(weight, nd)
    n, c, h, wd = x.shape
    kh, kw = w.shape[2], w.shape[3]
    if not transposed:
        if c != w.shape[1] * groups:
            raise RuntimeError(f"Given groups={groups}, weight of size {list(weight.shape)}, expected input"
                               f"{list(input.shape)} to have {w.shape[1] * groups} channels, but got {c} "
                               f"channels instead")
        oh = (h + 2 * p[0] - d[0] * (kh - 1) - 1) // s[0] + 1
        ow = (wd + 2 * p[1] - d[1] * (kw - 1) - 1) // s[1] + 1
        if oh <= 0 or ow <= 0:
            raise RuntimeError("Calculated output size is too small for the input and kernel")
        shape = (n, w.shape[0], oh, ow)
        out = _library_forward(x, w, bias, s, p, d, groups, False, opad, shape)
        if out is None:
            out = _run("fwd", x, w, shape, s, p, d, (kh, kw), w.shape[1], w.shape[0] // groups,
                       input.dtype, bias, input)
    else:
        cout = w.shape[1] * groups
        oh = (h - 1) * s[0] - 2 * p[0] + d[0] * (kh - 1) + opad[0] + 1
        ow = (wd - 1) * s[1] - 2 * p[1] + d[1] * (kw - 1) + opad[1] + 1
        shape = (n, cout, oh, ow)
        out = _library_forward(x, w, bias, s, p, d, groups, True, opad, shape)
        if out is None:
            out = _run("data", x, w, shape, s, p, d, (kh, kw), w.shape[1], w.shape[0] // groups,
                       input.dtype, None, input)
            if bias is not None:
                out = out + bias.reshape(1, -1, 1, 1)
    return out.squeeze(2) if nd == 1 else out


@register("convolution_backward")
def convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,  # noqa: A002
                         output_padding, groups, output_mask):
    """aten.convolution_backward -> (grad_input, grad_weight, grad_bias)."""
    _check("convolution_backward", grad_output, input, weight)
    if input.dim() == 5:
        return conv3d.convolution3d_backward(grad_output, input, weight, stride, padding, dilation,
                                             transposed, groups, output_mask)
    nd, s, p, d, _ = _geometry(input, weight, stride, padding, dilation, output_padding)
    go, x, w = _as4(grad_output, nd), _as4(input, nd), _as4(weight, nd)
    geometry = (s, p, d, (w.shape[2], w.shape[3]), w.shape[1], w.shape[0] // groups)
    gi = gw = gb = None
    if output_mask[0]:  # a transposed convolution's input gradient is the forward convolution
        gi = _run("fwd" if transposed else "data", go, w, tuple(x.shape), *geometry, input.dtype, like=input)
        gi = gi.squeeze(2) if nd == 1 else gi
    if output_mask[1]:  # ... and its weight gradient swaps the roles of input and output gradient
        a, b = (x, go) if transposed else (go, x)
        gw = _run("wgrad", a, b, tuple(w.shape), *geometry, weight.dtype, like=weight)
        gw = gw.squeeze(2) if nd == 1 else gw
    if output_mask[2]:
        gb = grad_output.sum([0] + list(range(2, grad_output.dim())))
    return gi, gw, gb
