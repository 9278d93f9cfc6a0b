"""max_unpool2d / max_unpool3d (max_unpool1d reaches aten as 2-d): each value is scattered to its flat
index within its (N, C) plane of a zero output, with one device scatter."""

from __future__ import annotations

import torch

from .out_args import write_out
from .registry import register


def _unpool(self, indices, output_size, op: str):
    k = len(output_size)
    if self.shape != indices.shape:
        raise RuntimeError(f"{op}: Expected shape of indices to be same as that of the input tensor "
                           f"({list(self.shape)}) but got indices tensor with shape: {list(indices.shape)}")
    if indices.dtype != torch.int64:
        raise RuntimeError(f"{op}: elements in indices should be type int64 but got: {indices.dtype}")
    if self.dim() not in (k + 1, k + 2):
        raise RuntimeError(f"{op}: Expected {k + 1}-D or {k + 2}-D tensor, got {self.dim()}-D")
    lead = tuple(self.shape[: self.dim() - k])
    plane = 1
    for s in output_size:
        plane *= s
    src = self.reshape(*lead, -1)
    idx = indices.reshape(*lead, -1)
    out = torch.zeros((*lead, plane), dtype=self.dtype, device=self.device)
    if idx.numel():
        if bool(((idx < 0) | (idx >= plane)).any().item()):
            raise RuntimeError(f"{op}: Found an invalid max index (outside an output plane of {plane} "
                               "elements)")
        out.scatter_(out.dim() - 1, idx, src)
    return out.reshape(*lead, *output_size)


@register("max_unpool2d")
def max_unpool2d(self, indices, output_size):
    """aten.max_unpool2d."""
    return _unpool(self, indices, list(output_size), "max_unpool2d")


@register("max_unpool2d.out")
def max_unpool2d_out(self, indices, output_size, *, out):
    """aten.max_unpool2d (out=)."""
    return write_out(out, max_unpool2d(self, indices, output_size))


@register("max_unpool3d")
def max_unpool3d(self, indices, output_size, stride, padding):
    """aten.max_unpool3d (stride and padding only shape-check on the CPU; the indices say where)."""
    return _unpool(self, indices, list(output_size), "max_unpool3d")


@register("max_unpool3d.out")
def max_unpool3d_out(self, indices, output_size, stride, padding, *, out):
    """aten.max_unpool3d (out=)."""
    return write_out(out, max_unpool3d(self, indices, output_size, stride, padding))
