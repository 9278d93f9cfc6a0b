"""3-d convolution (grouped, strided, dilated, padded, transposed) and its backward, from the 2-d kernels.

A 3-d convolution is a sum over the kernel's depth taps: tap kd reads the depth slices
kd*dil, kd*dil + stride, .. of the depth-padded input, which, with depth folded into the batch, is one
2-d convolution by weight[:, :, kd]. So forward is KD batched 2-d convolutions summed; the input gradient
adds each tap's 2-d input gradient back into those strided slices; the weight gradient of tap kd is the
2-d weight gradient of the same slices. A transposed 3-d convolution is the input gradient of the
convolution it transposes (and its backward the forward and weight gradient with roles swapped).
"""

from __future__ import annotations

import torch

aten = torch.ops.aten


def _triple(v) -> tuple[int, int, int]:
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return tuple(v * 3) if len(v) == 1 else tuple(v)


def _taps(x: torch.Tensor, taps: int, out_depth: int, s, p, d):
    """Per depth tap: x's depth slices it reads, depth folded into the batch -> [N*Do, C, H, W]."""
    n, c, _, h, w = x.shape
    xp = torch.nn.functional.pad(x, (0, 0, 0, 0, p[0], p[0])) if p[0] else x
    for k in range(taps):
        start = k * d[0]
        sl = xp[:, :, start:start + (out_depth - 1) * s[0] + 1:s[0]]
        yield sl.transpose(1, 2).reshape(n * out_depth, c, h, w)


def _conv2d(x2, w2, s, p, d, groups):
    return aten.convolution(x2, w2, None, s[1:], p[1:], d[1:], False, [0, 0], groups)


def forward(x, w, bias, s, p, d, groups) -> torch.Tensor:
    """conv3d of x [N, C, D, H, W] by w [O, C/groups, KD, KH, KW]."""
    if x.shape[1] != w.shape[1] * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(w.shape)}, expected input"
                           f"{list(x.shape)} to have {w.shape[1] * groups} channels, but got {x.shape[1]} "
                           f"channels instead")
    n, kd = x.shape[0], w.shape[2]
    out_depth = (x.shape[2] + 2 * p[0] - d[0] * (kd - 1) - 1) // s[0] + 1
    if out_depth <= 0:
        raise RuntimeError("Calculated output size is too small for the input and kernel")
    acc = None
    for k, x2 in enumerate(_taps(x, kd, out_depth, s, p, d)):
        y = _conv2d(x2, w[:, :, k], s, p, d, groups)
        acc = y if acc is None else acc + y
    out = acc.reshape(n, out_depth, *acc.shape[1:]).transpose(1, 2)
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1, 1)
    return out.contiguous()


def input_grad(go, w, in_shape, s, p, d, groups) -> torch.Tensor:
    """Gradient of conv3d (weight w) w.r.t. an input of `in_shape`, given the output gradient go."""
    n, c, depth, h, wd = in_shape
    out_depth = go.shape[2]
    padded = torch.zeros((n, c, depth + 2 * p[0], h, wd), dtype=go.dtype, device=go.device)
    g2 = go.transpose(1, 2).reshape(n * out_depth, *go.shape[1:2], *go.shape[3:])
    shape_only = torch.empty((n * out_depth, c, h, wd), dtype=go.dtype, device=go.device)
    for k in range(w.shape[2]):
        gi2 = aten.convolution_backward(g2, shape_only, w[:, :, k], None, s[1:], p[1:], d[1:], False, [0, 0],
                                        groups, [True, False, False])[0]
        start = k * d[0]
        padded[:, :, start:start + (out_depth - 1) * s[0] + 1:s[0]] += gi2.reshape(n, out_depth, c, h, wd) \
            .transpose(1, 2)
    return padded[:, :, p[0]:p[0] + depth].contiguous()


def weight_grad(go, x, w_shape, s, p, d, groups) -> torch.Tensor:
    """Gradient of conv3d w.r.t. its weight of `w_shape`, given input x and output gradient go."""
    n, out_depth = go.shape[0], go.shape[2]
    g2 = go.transpose(1, 2).reshape(n * out_depth, *go.shape[1:2], *go.shape[3:])
    shape_only = torch.empty((w_shape[0], w_shape[1], *w_shape[3:]), dtype=go.dtype, device=go.device)
    taps = [aten.convolution_backward(g2, x2, shape_only, None, s[1:], p[1:], d[1:], False, [0, 0], groups,
                                      [False, True, False])[1]
            for x2 in _taps(x, w_shape[2], out_depth, s, p, d)]
    return torch.stack(taps, dim=2)


def _f32(*tensors):
    """float32 copies of 16-bit operands: the taps are summed once, in f32, then rounded (as the CPU does)."""
    return [t.to(torch.float32) if t is not None and t.dtype != torch.float32 else t for t in tensors]


def convolution3d(x, w, bias, stride, padding, dilation, transposed, output_padding, groups) -> torch.Tensor:
    """aten.convolution for 5-d inputs."""
    if x.dtype != torch.float32:
        return convolution3d(*_f32(x, w, bias), stride, padding, dilation, transposed, output_padding,
                             groups).to(x.dtype)
    s, p, d = _triple(stride), _triple(padding), _triple(dilation)
    if not transposed:
        return forward(x, w, bias, s, p, d, groups)
    op = _triple(output_padding) if output_padding else (0, 0, 0)
    n, _, depth, h, wd = x.shape
    k = w.shape[2:]
    size = [(i - 1) * st - 2 * pa + di * (kk - 1) + o + 1
            for i, st, pa, di, kk, o in zip((depth, h, wd), s, p, d, k, op, strict=True)]
    out = input_grad(x, w, (n, w.shape[1] * groups, *size), s, p, d, groups)
    return out + bias.reshape(1, -1, 1, 1, 1) if bias is not None else out


def convolution3d_backward(go, x, w, stride, padding, dilation, transposed, groups, output_mask):
    """aten.convolution_backward for 5-d inputs -> (grad_input, grad_weight, grad_bias)."""
    if x.dtype != torch.float32:
        grads = convolution3d_backward(*_f32(go, x, w), stride, padding, dilation, transposed, groups,
                                       output_mask)
        return tuple(g.to(x.dtype) if g is not None else None for g in grads)
    s, p, d = _triple(stride), _triple(padding), _triple(dilation)
    gi = gw = gb = None
    if output_mask[0]:
        gi = forward(go, w, None, s, p, d, groups) if transposed else \
            input_grad(go, w, tuple(x.shape), s, p, d, groups)
    if output_mask[1]:
        gw = weight_grad(x, go, tuple(w.shape), s, p, d, groups) if transposed else \
            weight_grad(go, x, tuple(w.shape), s, p, d, groups)
    if output_mask[2]:
        gb = go.sum([0, 2, 3, 4])
    return gi, gw, gb
