"""Views of webgpu tensors share their storage (buffer id) and only change sizes/strides/offset.

The metadata kernels (as_strided, view, _reshape_alias, resize_, set_) live in C++ (csrc/aten.cpp);
transpose, permute, slicing, select, narrow, expand, squeeze/unsqueeze, unflatten, diagonal and friends
are composite ops built on them. `.contiguous()` materialises a view through the strided-copy kernel.
This module adds the view-like ops whose CPU kernels are not composite.
"""

from __future__ import annotations

import torch

from .registry import register


@register("unfold")
def unfold(self: torch.Tensor, dimension: int, size: int, step: int) -> torch.Tensor:
    """Tensor.unfold: sliding windows of `size` every `step` along `dimension`, as a view."""
    if self.dim() == 0:
        return unfold(self.unsqueeze(0), 0, size, step).squeeze(0)
    dim = dimension % self.dim()
    length = self.shape[dim]
    if size > length or step <= 0:
        raise RuntimeError(f"unfold: size {size} exceeds dimension {dim} ({length}) or step {step} <= 0")
    sizes, strides = list(self.shape), list(self.stride())
    sizes[dim] = (length - size) // step + 1
    strides[dim] *= step
    return self.as_strided((*sizes, size), (*strides, self.stride(dim)), self.storage_offset())
