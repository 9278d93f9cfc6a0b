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


def narrow(op: Operand, dim: int, start: int, length: int) -> Operand:
    """Elements [start, start + length) of `op` along `dim` (a view: same buffer, moved offset)."""
    sizes = list(op.sizes)
    sizes[dim] = length
    return Operand(op.buffer_id, op.offset + start * op.strides[dim], op.dtype, tuple(sizes), op.strides)


def byte_extent(op: Operand) -> tuple[int, int]:
    """[first, last + 1) byte range of op's buffer that its elements touch (op has elements)."""
    last = op.offset + sum((n - 1) * s for n, s in zip(op.sizes, op.strides, strict=True))
    return op.offset * op.dtype.itemsize, (last + 1) * op.dtype.itemsize


def widest_dim(op: Operand) -> int | None:
    """The dim whose halving shrinks op's byte extent most (largest (size - 1) * stride), or None."""
    spans = [((n - 1) * s, d) for d, (n, s) in enumerate(zip(op.sizes, op.strides, strict=True)) if n > 1]
    return max(spans)[1] if spans else None


@dataclass(frozen=True)
class Split:
    """window_bindings' answer when operands sharing a binding span more than one: halve `dim` of
    operand `operand` (and whatever shares that dim with it) and launch each half."""

    operand: int
    dim: int


@dataclass(frozen=True)
class Windows:
    """window_bindings' answer: the bindings to pass, which one each operand uses, and the operands with
    offsets rebased onto their binding."""

    bindings: list
    slot: list[int]
    operands: list[Operand]


def window_bindings(rt, operands: list[Operand], written: int = -1) -> Windows | Split:
    """Bindings for a kernel's operands (operand `written` is the one it writes, -1 for none).

    A buffer that fits one binding is bound whole, once. Operands of a larger buffer get a BufferSlice
    covering just their elements, from an aligned start: one per read-only operand, and one shared by
    every operand of the written operand's buffer (WebGPU forbids a written range aliasing another
    binding). Returns a Split when some binding would still exceed max-storage-buffer-binding-size.
    Lets kernels that address elements by offset and strides use any part of any buffer."""
    from ...runtime import BufferSlice, LimitExceededError

    limit = rt.max_storage_binding
    align = int(rt.info.limits.get("min-storage-buffer-offset-alignment", 256))
    written_buf = operands[written].buffer_id if written >= 0 else None
    groups: dict[object, list[int]] = {}
    for i, op in enumerate(operands):
        whole = op.buffer_id == 0 or rt.buffer(op.buffer_id).aligned_nbytes <= limit
        key = op.buffer_id if whole or op.buffer_id == written_buf else ("window", i)
        groups.setdefault(key, []).append(i)
    bindings: list = []
    slot = [0] * len(operands)
    rebased = list(operands)
    for key, members in groups.items():
        if not isinstance(key, tuple) and (key == 0 or rt.buffer(key).aligned_nbytes <= limit):
            binding = key
        else:
            spans = {i: byte_extent(operands[i]) for i in members if numel(operands[i].sizes)}
            start = min(s for s, _ in spans.values())
            end = max(e for _, e in spans.values())
            base = start - start % align
            if end - base > limit:
                widest = max(spans, key=lambda i: spans[i][1] - spans[i][0])
                dim = widest_dim(operands[widest])
                if dim is None:
                    raise LimitExceededError(
                        f"operands of one buffer span {end - base} bytes, more than one kernel binding "
                        f"(max-storage-buffer-binding-size {limit}); make one of them contiguous first")
                return Split(widest, dim)
            buf = operands[members[0]].buffer_id
            binding = BufferSlice(buf, base, -(-(end - base) // 4) * 4)
            for i in members:
                op = operands[i]
                offset = op.offset - base // op.dtype.itemsize
                rebased[i] = Operand(buf, offset, op.dtype, op.sizes, op.strides)
        if binding not in bindings:
            bindings.append(binding)
        for i in members:
            slot[i] = bindings.index(binding)
    return Windows(bindings, slot, rebased)
