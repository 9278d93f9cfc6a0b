"""The dtypes a webgpu tensor may hold, and how WGSL kernels see them."""

from __future__ import annotations

from dataclasses import dataclass

import torch

FLOAT64_MESSAGE = "WebGPU has no float64 — use float32"


@dataclass(frozen=True)
class DTypeInfo:
    """How one torch dtype is stored in WGSL: element `size` bytes, packed `per_word` per u32 word."""

    dtype: torch.dtype
    size: int
    wgsl: str  # WGSL scalar type used for arithmetic on unpacked values ("f32", "i32", "u32")
    kind: str  # "float", "int", "uint", "bool"

    @property
    def per_word(self) -> int:
        """Elements per 32-bit word (2 for 16-bit types, 4 for 8-bit types, 1 otherwise)."""
        return max(1, 4 // self.size)


SUPPORTED: dict[torch.dtype, DTypeInfo] = {
    torch.float32: DTypeInfo(torch.float32, 4, "f32", "float"),
    torch.float16: DTypeInfo(torch.float16, 2, "f32", "float"),
    torch.bfloat16: DTypeInfo(torch.bfloat16, 2, "f32", "float"),
    torch.int64: DTypeInfo(torch.int64, 8, "i32", "int"),
    torch.int32: DTypeInfo(torch.int32, 4, "i32", "int"),
    torch.int16: DTypeInfo(torch.int16, 2, "i32", "int"),
    torch.int8: DTypeInfo(torch.int8, 1, "i32", "int"),
    torch.uint8: DTypeInfo(torch.uint8, 1, "u32", "uint"),
    torch.bool: DTypeInfo(torch.bool, 1, "u32", "bool"),
    # (real, imag) float32 pairs; kernels see them as float32 views with a last dim of 2 (ops/complex.py)
    torch.complex64: DTypeInfo(torch.complex64, 8, "vec2<f32>", "complex"),
}


def info(dtype: torch.dtype) -> DTypeInfo:
    """The DTypeInfo of a supported dtype (raises the documented error otherwise)."""
    check_supported(dtype, "webgpu tensor")
    return SUPPORTED[dtype]


def check_supported(dtype: torch.dtype, op: str) -> None:
    """Raise TypeError naming `op` for float64, complex and other dtypes WebGPU cannot hold."""
    if dtype in SUPPORTED:
        return
    if dtype == torch.float64:
        raise TypeError(f"{op}: {FLOAT64_MESSAGE}")
    if dtype.is_complex:
        raise TypeError(f"{op}: WebGPU has no {dtype} (no float64) — use torch.complex64")
    supported = ", ".join(str(d).removeprefix("torch.") for d in SUPPORTED)
    raise TypeError(f"{op}: dtype {dtype} is not supported on webgpu (supported: {supported})")
