"""How each torch dtype is stored in a WebGPU buffer and computed in WGSL: the torch side of
kernels/wgsl/storage.py (which says how each storage dtype is packed into u32 words and loaded)."""

from __future__ import annotations

import torch

from ...kernels.wgsl.storage import INT64_INDEX_LOAD, STORAGE, DtypeInfo, convert

__all__ = ["DTYPES", "DtypeInfo", "INT64_INDEX_LOAD", "UnsupportedDtypeError", "convert", "dtype_info",
           "storage_name"]


class UnsupportedDtypeError(TypeError):
    """A dtype the WebGPU kernels cannot compute in."""


STORAGE_NAMES: dict[torch.dtype, str] = {
    torch.float32: "f32", torch.int32: "i32", torch.float16: "f16", torch.bfloat16: "bf16",
    torch.int16: "i16", torch.int8: "i8", torch.uint8: "u8", torch.bool: "bool", torch.int64: "i64",
}
DTYPES: dict[torch.dtype, DtypeInfo] = {dtype: STORAGE[name] for dtype, name in STORAGE_NAMES.items()}


def storage_name(dtype: torch.dtype, op: str = "") -> str:
    """The kernel library's name of `dtype`'s storage ("f32", "bf16", ...), or a clear error naming the op."""
    dtype_info(dtype, op)
    return STORAGE_NAMES[dtype]


def dtype_info(dtype: torch.dtype, op: str = "") -> DtypeInfo:
    """The storage layout of `dtype`, or a clear error naming the op."""
    info = DTYPES.get(dtype)
    if info is None:
        where = f"'{op}' " if op else ""
        hint = " (WebGPU has no float64 — use float32)" if dtype == torch.float64 else ""
        raise UnsupportedDtypeError(f"webgpu: {where}does not support dtype {dtype}{hint}")
    return info
