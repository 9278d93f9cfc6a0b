"""torch.equal on the device: one elementwise comparison and an all-reduction; only the bool comes back."""

from __future__ import annotations

import torch

from .registry import register


@register("equal")
def equal(self, other):
    """aten.equal: same shape and every element equal (NaN never equals)."""
    if self.device.type != other.device.type:
        raise RuntimeError(f"webgpu: 'equal' expects both tensors on webgpu, got {self.device} and "
                           f"{other.device}")
    if self.shape != other.shape:
        return False
    if self.numel() == 0:
        return True
    return bool(torch.eq(self, other).all().item())
