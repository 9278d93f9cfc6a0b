"""Reflection and replication padding (1-d/2-d/3-d) and their backwards: per padded dim a small host
index table (which source row each output row reads), applied on device with index_select; the
backwards sum gradients back with index_add."""

from __future__ import annotations

import torch

from .indexing import _index_add, index_select
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
        out.resize_(r.shape)
        return out.copy_(r)

    def backward(grad_output, self, padding):
        """aten reflection/replication padding backward."""
        return _pad_backward(grad_output, self, list(padding), mode)

    register(name)(forward)
    register(name + ".out")(forward_out)
    register(name + "_backward")(backward)


for _n in (1, 2, 3):
    _register(f"reflection_pad{_n}d", "reflect")
    _register(f"replication_pad{_n}d", "replicate")
