"""renorm: each slice along `dim` whose p-norm exceeds maxnorm is scaled down to it (torch's formula)."""

from __future__ import annotations

import torch

from .out_args import write_out
from .registry import register


@register("renorm")
def renorm(self, p, dim, maxnorm):
    """aten.renorm: factor = maxnorm / (norm + 1e-7) where norm > maxnorm, else 1."""
    if p <= 0:
        raise RuntimeError(f"renorm: non-positive-norm not supported, got p={p}")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    if self.dim() <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {self.dim()} dimensions")
    dim = dim % self.dim()
    others = [d for d in range(self.dim()) if d != dim]
    norm = torch.linalg.vector_norm(self.float(), p, others, keepdim=True)
    factor = torch.where(norm > maxnorm, maxnorm / (norm + 1e-7), torch.ones_like(norm))
    return (self * factor.to(self.dtype)) if self.dtype != torch.float32 else self * factor


@register("renorm.out")
def renorm_out(self, p, dim, maxnorm, *, out):
    """aten.renorm (out=)."""
    return write_out(out, renorm(self, p, dim, maxnorm))


@register("renorm_")
def renorm_inplace(self, p, dim, maxnorm):
    """Tensor.renorm_."""
    return self.copy_(renorm(self, p, dim, maxnorm))
