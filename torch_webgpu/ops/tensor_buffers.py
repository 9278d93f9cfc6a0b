"""From webgpu tensors to runtime buffers: ids, element offsets, new tensors, kernel parameter blocks.

A webgpu storage is one runtime buffer. The C++ allocator (torch_webgpu._C) makes its data pointer
`buffer_id << 32`, so for any view `data_ptr() == (buffer_id << 32) + storage_offset * itemsize`.
Kernels bind the WHOLE buffer (binding offsets must be 16/256-byte aligned, views are not) and take the
element offset and the sizes/strides through a parameter block (see ops/strided.py). Buffers larger than
one binding (max-storage-buffer-binding-size) are bound through `windowed_binding`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import torch

from .. import device_state
from ..runtime import BufferSlice, Constant, Runtime
from . import dtypes

MAX_DIMS = 8  # strided kernels take up to 8 dims; more are rejected with a clear error


def runtime() -> Runtime:
    """The process-wide runtime with the C++ allocator's freed-id queue hooked into its pool."""
    return device_state.runtime()


def buffer_id(t: torch.Tensor) -> int:
    """The runtime buffer id holding `t`'s storage (0 for a storage of zero bytes)."""
    return t.untyped_storage().data_ptr() >> 32


def byte_offset(t: torch.Tensor) -> int:
    """Byte offset of `t`'s first element inside its buffer."""
    return t.storage_offset() * t.element_size()


def buffer_of(t: torch.Tensor) -> tuple[int, int]:
    """(buffer id, byte offset of the first element) of a webgpu tensor."""
    return buffer_id(t), byte_offset(t)


def binding(t: torch.Tensor) -> BufferSlice:
    """The whole buffer behind `t`, ready for rt.dispatch (pass element offsets as parameters)."""
    if t.device.type != "webgpu":
        raise ValueError(f"expected a webgpu tensor, got one on {t.device}")
    return BufferSlice(buffer_id(t))


def new_empty(shape: Sequence[int], dtype: torch.dtype, like: torch.Tensor | None = None) -> torch.Tensor:
    """A new contiguous, uninitialised webgpu tensor."""
    device = like.device if like is not None else torch.device("webgpu", 0)
    return torch.empty(tuple(shape), dtype=dtype, device=device)


def pack_u32(words: Sequence[int]) -> bytes:
    """Little-endian u32 words (values taken modulo 2**32) padded to 16 bytes."""
    data = struct.pack(f"<{len(words)}I", *(int(w) & 0xFFFFFFFF for w in words))
    return data + b"\0" * (-len(data) % 16)


def params(words: Sequence[int]) -> Constant:
    """A cached uniform parameter block of u32 words."""
    return runtime().constant(pack_u32(words))


def check_dtype(dtype: torch.dtype, op: str) -> None:
    """Raise a clear error for dtypes the webgpu device cannot hold (float64, complex, ...)."""
    dtypes.check_supported(dtype, op)


def extent(t: torch.Tensor) -> tuple[int, int]:
    """[first, last + 1) byte range of t's buffer that t's elements touch (t.numel() > 0)."""
    first = t.storage_offset()
    last = first + sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True))
    return first * t.element_size(), (last + 1) * t.element_size()


def max_binding_bytes() -> int:
    """The largest range one kernel binding may cover on this device."""
    return runtime().max_storage_binding


def windowed_binding(t: torch.Tensor) -> tuple[BufferSlice, int]:
    """(binding, element offset inside it) covering only t's elements: lets kernels touch tensors whose
    buffer exceeds max-storage-buffer-binding-size. Raises LimitExceededError if t's own extent does."""
    from ..runtime import LimitExceededError

    rt = runtime()
    if rt.buffer(buffer_id(t)).aligned_nbytes <= rt.max_storage_binding:
        return BufferSlice(buffer_id(t)), t.storage_offset()  # the whole buffer (best bind-group reuse)
    start, end = extent(t)
    align = int(rt.info.limits.get("min-storage-buffer-offset-alignment", 256))
    base = start - start % align
    if end - base > rt.max_storage_binding:
        raise LimitExceededError(
            f"a view spanning {end - base} bytes exceeds max-storage-buffer-binding-size "
            f"({rt.max_storage_binding}); split the tensor")
    return BufferSlice(buffer_id(t), base, end - base), t.storage_offset() - base // t.element_size()


def fits_one_binding(t: torch.Tensor) -> bool:
    """True if t's elements lie within one kernel binding (after aligning the start down)."""
    start, end = extent(t)
    align = int(runtime().info.limits.get("min-storage-buffer-offset-alignment", 256))
    return end - (start - start % align) <= max_binding_bytes()


def split_for_binding(t: torch.Tensor) -> int:
    """The dim to halve when t does not fit one binding: the first dim of size > 1 (keeps logical order)."""
    for d, n in enumerate(t.shape):
        if n > 1:
            return d
    raise ValueError("a single element always fits one binding")
