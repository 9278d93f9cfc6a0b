"""Writing a computed result into an aten `out=` tensor (resized to the result's shape first)."""

from __future__ import annotations

import torch


def write_out(out: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """Resize `out` to `value`'s shape, copy `value` into it and return it."""
    out.resize_(value.shape)
    return out.copy_(value)
