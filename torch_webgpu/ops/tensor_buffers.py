"""From webgpu tensors to runtime buffers: ids, element offsets, new tensors, kernel parameter blocks.

A webgpu storage is one runtime buffer. The C++ allocator (torch_webgpu._C) makes its data pointer
`buffer_id << 32`, so for any view `data_ptr() == (buffer_id << 32) + storage_offset * itemsize`.
Kernels bind the WHOLE buffer (binding offsets must be 16/256-byte aligned, views are not) and take the
element offset and the sizes/strides through a parameter block (`strided_params`).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import torch

from ..runtime import BufferSlice, Constant, Runtime
from . import dtypes

MAX_DIMS = 8  # strided kernels take up to 8 dims; more are rejected with a clear error


def runtime() -> Runtime:
    """The process-wide runtime with the C++ allocator's freed-id queue hooked into its pool."""
    from ..device import runtime as _device_runtime

    return _device_runtime()


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


def strided_params(t: torch.Tensor, extra: Sequence[int] = (), ndims: int = MAX_DIMS) -> list[int]:
    """u32 words: [numel, ndim, element offset, extra..., sizes[ndims], strides[ndims]] (dims padded).

    Strides are in elements; a negative stride cannot occur for torch tensors. Sizes are padded with 1
    and strides with 0 so kernels can loop over all `ndims` dims unconditionally.
    """
    if t.dim() > ndims:
        raise ValueError(f"webgpu strided kernels support at most {ndims} dims, got a {t.dim()}-d tensor")
    sizes = list(t.shape) + [1] * (ndims - t.dim())
    strides = list(t.stride()) + [0] * (ndims - t.dim())
    for v in (*sizes, *strides, t.storage_offset(), t.numel()):
        if v >= 1 << 32:
            raise ValueError(f"tensor too large for 32-bit WebGPU indexing (shape {tuple(t.shape)})")
    return [t.numel(), t.dim(), t.storage_offset(), *extra, *sizes, *strides]


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
