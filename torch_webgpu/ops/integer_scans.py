"""Exact cumsum of integer and bool tensors into int64 (torch's result dtype for them).

The input is widened to int64 and scanned by ops/scans.py's blocked scan, adding in u32 pairs with carry
(WGSL has no 64-bit integers), so sums past 2**31 (and past float32's 2**24) stay exact. Eager GPT-2
needs this: its position ids are `attention_mask.cumsum(-1)`.
"""

from __future__ import annotations

import torch

from .codegen.dtypes import dtype_info
from .scans import blocked_scan


def integer_cumsum(x: torch.Tensor, dim: int) -> torch.Tensor:
    """int64 cumsum of an integer or bool webgpu tensor along `dim` (contiguous result)."""
    info = dtype_info(x.dtype, "cumsum")
    if info.kind not in ("i32", "bool", "i64"):
        raise TypeError(f"webgpu: integer cumsum of {x.dtype}: expected an integer or bool tensor")
    src = x if x.dim() else x.reshape(1)
    dim = dim % src.dim()
    moved = src.movedim(dim, -1)
    rows = moved.numel() // max(moved.shape[-1], 1)
    wide = moved.to(torch.int64).contiguous().reshape(rows, moved.shape[-1])
    y = blocked_scan("cumsum_i64", wide)[0]
    return y.reshape(moved.shape).movedim(-1, dim).contiguous().reshape(x.shape)
