"""`torch.ops.webgpu.create_buffer` / `write_buffer`: Python kernels and fake (meta) kernels.

The schemas are defined in C++ (csrc/aten.cpp): `create_buffer(int[] size, int[] stride, ScalarType?
dtype=None) -> Tensor` makes an uninitialised webgpu tensor; `write_buffer(Tensor(a!) dst, Tensor src)`
writes host (or device) data into it. The fake kernels let both run inside compiled graphs.
"""

from __future__ import annotations

import torch

from .copy import copy_on_device, upload
from .dtypes import check_supported


@torch.library.impl("webgpu::write_buffer", "PrivateUse1")
def write_buffer(dst: torch.Tensor, src: torch.Tensor) -> None:
    """Write `src` (CPU or webgpu, same number of elements) into the webgpu tensor `dst`."""
    check_supported(dst.dtype, "webgpu::write_buffer")
    if dst.device.type != "webgpu":
        raise ValueError(f"webgpu::write_buffer: dst must be a webgpu tensor, got one on {dst.device}")
    if src.numel() != dst.numel():
        raise ValueError(f"webgpu::write_buffer: src has {src.numel()} elements, dst {tuple(dst.shape)} "
                         f"has {dst.numel()}")
    src = src.reshape(dst.shape)
    if src.device.type == "webgpu":
        copy_on_device(src, dst)
    else:
        upload(src.cpu(), dst)


@torch.library.register_fake("webgpu::create_buffer")
def _create_buffer_fake(size: list[int], stride: list[int], dtype: torch.dtype | None = None) -> torch.Tensor:
    check_supported(dtype or torch.get_default_dtype(), "webgpu::create_buffer")
    return torch.empty_strided(size, stride, dtype=dtype, device="webgpu")


@torch.library.register_fake("webgpu::write_buffer")
def _write_buffer_fake(dst: torch.Tensor, src: torch.Tensor) -> None:
    return None
