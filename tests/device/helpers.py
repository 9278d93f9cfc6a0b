"""Shared values for the webgpu device tests."""

from __future__ import annotations

import torch

# Every dtype a webgpu tensor may hold (issue 3, point 7).
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.int16, torch.int8,
          torch.uint8, torch.bool]


def sample(shape: tuple[int, ...], dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    """Deterministic CPU values of `dtype` spanning negatives, zero and (for floats) fractions."""
    gen = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=gen) * 10).to(dtype)
    low, high = (0, 256) if dtype == torch.uint8 else (-100, 100)
    return torch.randint(low, high, shape, generator=gen).to(dtype)
