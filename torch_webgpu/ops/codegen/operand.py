"""A kernel operand: a strided view of a runtime buffer (buffer id, element offset, dtype, sizes, strides)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import torch

MAX_DIMS = 8


@dataclass(frozen=True)
class Operand:
    """Where a tensor's elements live in a runtime buffer; strides and offset count elements."""

    buffer_id: int
    offset: int
    dtype: torch.dtype
    sizes: tuple[int, ...]
    strides: tuple[int, ...]

    def expand(self, shape: tuple[int, ...]) -> Operand:
        """This operand broadcast to `shape` (stride 0 on broadcast dims)."""
        pad = len(shape) - len(self.sizes)
        sizes = (1,) * pad + tuple(self.sizes)
        strides = (0,) * pad + tuple(self.strides)
        strides = tuple(0 if s == 1 and n != 1 else st
                        for s, n, st in zip(sizes, shape, strides, strict=True))
        return Operand(self.buffer_id, self.offset, self.dtype, tuple(shape), strides)

    def is_contiguous(self) -> bool:
        """Row-major contiguous (size-1 dims ignored)."""
        expected = 1
        for n, s in zip(reversed(self.sizes), reversed(self.strides), strict=False):
            if n != 1 and s != expected:
                return False
            expected *= n
        return True


def numel(shape: tuple[int, ...]) -> int:
    """Number of elements of `shape`."""
    n = 1
    for s in shape:
        n *= s
    return n


def coalesce(shape: tuple[int, ...], stride_sets: list[tuple[int, ...]]) -> tuple[tuple, list[tuple]]:
    """Drop size-1 dims and merge dims that are contiguous in every stride set (keeps row-major order)."""
    dims = [d for d in range(len(shape)) if shape[d] != 1]
    out_shape: list[int] = []
    out_strides: list[list[int]] = [[] for _ in stride_sets]
    for d in dims:
        pairs = list(zip(out_strides, stride_sets, strict=True))
        if out_shape and all(st[-1] == s[d] * shape[d] for st, s in pairs):
            out_shape[-1] *= shape[d]
            for st, s in zip(out_strides, stride_sets, strict=False):
                st[-1] = s[d]
            continue
        out_shape.append(shape[d])
        for st, s in zip(out_strides, stride_sets, strict=False):
            st.append(s[d])
    return tuple(out_shape), [tuple(s) for s in out_strides]


def pack_u32(values: list) -> bytes:
    """Little-endian u32 words (ints are taken modulo 2**32, floats as f32 bits)."""
    words = [_F32_BITS(v)[0] if isinstance(v, float) else int(v) & 0xFFFFFFFF for v in values]
    return struct.pack(f"<{len(words)}I", *words)


def _f32_bits(v: float) -> tuple[int]:
    return struct.unpack("<I", struct.pack("<f", v))


_F32_BITS = _f32_bits
