"""Writes through data-dependent positions: masked_scatter, put, nonzero_static.

Positions come from a prefix sum of the mask on the device (as torch's CUDA kernels compute them), so
the only value that comes back is the count masked_scatter checks against the source size.
"""

from __future__ import annotations

import torch

from .out_args import write_out
from .registry import register


def _prefix_positions(mask_flat: torch.Tensor) -> torch.Tensor:
    """For each True of a flat bool mask, its rank among the Trues (int64); 0 where False."""
    ranks = mask_flat.to(torch.int32).cumsum(0, dtype=torch.int32) - 1
    return ranks.clamp_min(0).to(torch.int64)


@register("masked_scatter")
def masked_scatter(self, mask, source):
    """aten.masked_scatter: the Trues of mask (broadcast to self), in order, take source's elements."""
    if mask.dtype != torch.bool:
        raise RuntimeError(f"masked_scatter_: expected BoolTensor for mask, got {mask.dtype}")
    if source.dtype != self.dtype:
        raise RuntimeError(f"masked_scatter: expected self and source to have same dtypes but got "
                           f"{self.dtype} and {source.dtype}")
    shape = torch.broadcast_shapes(self.shape, mask.shape)
    base = self.expand(shape).reshape(-1)
    m = mask.expand(shape).reshape(-1)
    if m.numel() == 0:
        return base.reshape(shape).clone()
    count = int(m.sum().item())
    if count > source.numel():
        raise RuntimeError("masked_scatter: expected source to have at least as many elements as ones in "
                           "mask, "
                           f"got {source.numel()} for {count} ones")
    if count == 0:
        return base.reshape(shape).clone()
    picked = torch.take(source, _prefix_positions(m))
    return torch.where(m, picked, base).reshape(shape)


@register("masked_scatter.out")
def masked_scatter_out(self, mask, source, *, out):
    """aten.masked_scatter (out=)."""
    return write_out(out, masked_scatter(self, mask, source))


@register("masked_scatter_")
def masked_scatter_inplace(self, mask, source):
    """Tensor.masked_scatter_ (mask broadcasts to self, not the other way)."""
    if torch.broadcast_shapes(self.shape, mask.shape) != self.shape:
        raise RuntimeError(f"masked_scatter_: mask of shape {list(mask.shape)} does not broadcast to self's "
                           f"{list(self.shape)}")
    return self.copy_(masked_scatter(self, mask, source))


def _flat_index(index: torch.Tensor, numel: int) -> torch.Tensor:
    idx = index.reshape(-1).to(torch.int64)
    return torch.where(idx < 0, idx + numel, idx)


@register("put")
def put(self, index, source, accumulate=False):
    """aten.put: self viewed flat, self[index] = source (or += with accumulate)."""
    if index.dtype != torch.int64:
        raise RuntimeError(f"put(): Expected a long tensor for index, but got {index.dtype}")
    if source.dtype != self.dtype:
        raise RuntimeError(f"put(): self ({self.dtype}) and source ({source.dtype}) must have the same "
                           "scalar type")
    if index.numel() != source.numel():
        raise RuntimeError(f"put(): Expected source and index to have the same number of elements, but got "
                           f"source.numel() = {source.numel()}, index.numel() = {index.numel()}")
    flat = self.reshape(-1).clone()
    if index.numel() == 0:
        return flat.reshape(self.shape)
    if self.numel() == 0:
        raise IndexError("put(): Tried to put elements into an empty tensor")
    idx = _flat_index(index, self.numel())
    bad = ((idx < 0) | (idx >= self.numel())).any()
    if bool(bad.item()):
        raise IndexError(f"put(): index out of range for a tensor of {self.numel()} elements")
    flat.index_put_((idx,), source.reshape(-1), accumulate=bool(accumulate))
    return flat.reshape(self.shape)


@register("put.out")
def put_out(self, index, source, accumulate=False, *, out):
    """aten.put (out=)."""
    return write_out(out, put(self, index, source, accumulate))


@register("put_")
def put_inplace(self, index, source, accumulate=False):
    """Tensor.put_."""
    return self.copy_(put(self, index, source, accumulate))


@register("nonzero_static")
def nonzero_static(self, *, size, fill_value=-1):
    """aten.nonzero_static: the first `size` nonzero coordinates (row-major), padded with fill_value."""
    if size < 0:
        raise RuntimeError(f"nonzero_static: 'size' must be an non-negative integer, got {size}")
    nd = self.dim()
    if not -2**31 <= fill_value < 2**31:
        raise NotImplementedError(f"webgpu: nonzero_static fill_value {fill_value} outside int32 is not "
                                  "supported")
    # built in int32 (the device scatters 32-bit words), widened to int64 at the end
    out = torch.full((size + 1, nd), fill_value, dtype=torch.int32, device=self.device)
    if self.numel() == 0 or nd == 0 or size == 0:
        return out[:size].to(torch.int64)
    flat = (self != 0).reshape(-1)
    ranks = _prefix_positions(flat)
    # rows past `size` and zeros go to a spare last row, cut off at the end
    rows = torch.where(flat & (ranks < size), ranks, torch.full_like(ranks, size))
    lin = torch.arange(self.numel(), dtype=torch.int32, device=self.device)  # numel < 2**31 on WebGPU
    coords = []
    for d in reversed(range(nd)):
        coords.append(torch.remainder(lin, self.shape[d]))
        lin = torch.div(lin, self.shape[d], rounding_mode="floor")
    coords = torch.stack(coords[::-1], 1)
    out.index_put_((rows,), coords)
    return out[:size].to(torch.int64)


@register("nonzero_static.out")
def nonzero_static_out(self, *, size, fill_value=-1, out):
    """aten.nonzero_static (out=)."""
    return write_out(out, nonzero_static(self, size=size, fill_value=fill_value))
