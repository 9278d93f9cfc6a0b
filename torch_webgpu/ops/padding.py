"""Reflection and replication padding (1-d/2-d/3-d) and their backwards: per padded dim a small host
index table (which source row each output row reads), applied on device with index_select; the
backwards sum gradients back with index_add."""

from __future__ import annotations

import torch

from .indexing import _index_add, index_select
from .out_args import write_out
from .registry import register


def _table(size: int, lo: int, hi: int, mode: str) -> torch.Tensor:
    j = torch.arange(-lo, size + hi)
    if mode == "reflect":
        if lo >= size or hi >= size:
            raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding input "
                               f"dimension, but got: padding ({lo}, {hi}) at dimension of input {size}")
        period = 2 * (size - 1) if size > 1 else 1
        j = j.remainder(period) if size > 1 else torch.zeros_like(j)
        j = torch.where(j >= size, period - j, j)
    else:
        j = j.clamp(0, size - 1)
    return j.to(torch.int32)


def _pad(x: torch.Tensor, padding, mode: str) -> torch.Tensor:
    k = len(padding) // 2
    out = x
    for i in range(k):
        dim = x.dim() - 1 - i
        idx = _table(x.shape[dim], padding[2 * i], padding[2 * i + 1], mode).to(x.device)
        out = index_select(out, dim, idx)
    return out


def _pad_backward(g: torch.Tensor, x: torch.Tensor, padding, mode: str) -> torch.Tensor:
    k = len(padding) // 2
    out = g
    for i in range(k):
        dim = x.dim() - 1 - i
        idx = _table(x.shape[dim], padding[2 * i], padding[2 * i + 1], mode).to(x.device)
        shape = list(out.shape)
        shape[dim] = x.shape[dim]
        out = _index_add(torch.zeros(shape, dtype=g.dtype, device=g.device), dim, idx, out, 1)
    return out


def _register(name: str, mode: str) -> None:
    def forward(self, padding):
        """aten reflection/replication padding."""
        return _pad(self, list(padding), mode)

    def forward_out(self, padding, *, out):
        """aten reflection/replication padding (out=)."""
        r = _pad(self, list(padding), mode)
        return write_out(out, r)

    def backward(grad_output, self, padding):
        """aten reflection/replication padding backward."""
        return _pad_backward(grad_output, self, list(padding), mode)

    register(name)(forward)
    register(name + ".out")(forward_out)
    register(name + "_backward")(backward)


for _n in (1, 2, 3):
    _register(f"reflection_pad{_n}d", "reflect")
    _register(f"replication_pad{_n}d", "replicate")


# ---- im2col / col2im (nn.Unfold / nn.Fold) ---------------------------------------------------------------


def _im2col_table(c: int, h: int, w: int, k, d, p, s) -> tuple[torch.Tensor, int, int]:
    """Flat source index into the zero-padded [C, H+2p, W+2p] input for every (c*kh*kw, L) column entry."""
    hp, wp = h + 2 * p[0], w + 2 * p[1]
    oh = (hp - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (wp - d[1] * (k[1] - 1) - 1) // s[1] + 1
    if oh <= 0 or ow <= 0:
        raise RuntimeError(f"Given input with spatial size ({h}, {w}), kernel_size={list(k)}, "
                           f"dilation={list(d)}, padding={list(p)}, calculated shape of the array of sliding "
                           f"blocks as ({oh}, {ow}), but its components must be at least one.")
    ch = torch.arange(c).reshape(c, 1, 1, 1, 1)
    ki = torch.arange(k[0]).reshape(1, k[0], 1, 1, 1)
    kj = torch.arange(k[1]).reshape(1, 1, k[1], 1, 1)
    oi = torch.arange(oh).reshape(1, 1, 1, oh, 1)
    oj = torch.arange(ow).reshape(1, 1, 1, 1, ow)
    rows = oi * s[0] + ki * d[0]
    cols = oj * s[1] + kj * d[1]
    flat = (ch * hp + rows) * wp + cols
    return flat.reshape(-1).to(torch.int32), oh * ow, hp * wp


def _pairs(*vals):
    return [tuple(v) if len(v) == 2 else (v[0], v[0]) for v in vals]


@register("im2col")
def im2col(self, kernel_size, dilation, padding, stride):
    """aten.im2col (nn.functional.unfold): [N, C, H, W] -> [N, C*kh*kw, L]."""
    batched = self.dim() == 4
    x = self if batched else self.unsqueeze(0)
    k, d, p, s = _pairs(kernel_size, dilation, padding, stride)
    n, c, h, w = x.shape
    table, cols, plane = _im2col_table(c, h, w, k, d, p, s)
    xp = torch.nn.functional.pad(x, (p[1], p[1], p[0], p[0])) if any(p) else x
    out = index_select(xp.reshape(n, c * plane), 1, table.to(x.device)).reshape(n, c * k[0] * k[1], cols)
    return out if batched else out.squeeze(0)


@register("col2im")
def col2im(self, output_size, kernel_size, dilation, padding, stride):
    """aten.col2im (nn.functional.fold): overlapping columns summed back into [N, C, H, W]."""
    batched = self.dim() == 3
    x = self if batched else self.unsqueeze(0)
    k, d, p, s, o = _pairs(kernel_size, dilation, padding, stride, output_size)
    n = x.shape[0]
    c = x.shape[1] // (k[0] * k[1])
    table, cols, plane = _im2col_table(c, o[0], o[1], k, d, p, s)
    if cols != x.shape[2]:
        raise RuntimeError(f"Given output_size={list(o)}, kernel_size={list(k)}, dilation={list(d)}, "
                           f"padding={list(p)}, stride={list(s)}, expected size of input's dimension 2 to "
                           f"match the calculated number of sliding blocks {cols}, but got "
                           f"input.size(2)={x.shape[2]}.")
    zeros = torch.zeros((n, c * plane), dtype=self.dtype, device=self.device)
    acc = _index_add(zeros, 1, table.to(self.device), x.reshape(n, -1), 1)
    hp, wp = o[0] + 2 * p[0], o[1] + 2 * p[1]
    out = acc.reshape(n, c, hp, wp)[:, :, p[0]:p[0] + o[0], p[1]:p[1] + o[1]].contiguous()
    return out if batched else out.squeeze(0)
