"""addbmm: beta * self + alpha * (sum over the batch of batch1[b] @ batch2[b])."""

from __future__ import annotations

import torch

from .out_args import write_out
from .registry import register


@register("addbmm")
def addbmm(self, batch1, batch2, *, beta=1, alpha=1):
    """aten.addbmm (beta == 0 ignores self, NaN included, as on the CPU)."""
    if batch1.dim() != 3 or batch2.dim() != 3:
        raise RuntimeError(f"batch1 must be a 3D tensor, got {batch1.dim()}D and {batch2.dim()}D")
    if batch1.shape[0] != batch2.shape[0] or batch1.shape[2] != batch2.shape[1]:
        raise RuntimeError(f"addbmm: incompatible batch shapes {list(batch1.shape)} and {list(batch2.shape)}")
    n, m = batch1.shape[1], batch2.shape[2]
    # the CPU's order: result = beta * self, then one addmm per batch (each rounding to the result dtype,
    # which float16 results can tell apart from a single fused product)
    if beta == 0:
        result = torch.zeros((n, m), dtype=self.dtype, device=self.device)
    else:
        result = self.expand(n, m) * beta if beta != 1 else self.expand(n, m).clone()
    nb, k = batch1.shape[0], batch1.shape[2]
    if self.dtype == torch.float32 or nb * k == 0:
        # float32: one (n, b*k) @ (b*k, m) product, its sum running through the batches in order
        return torch.addmm(result, batch1.transpose(0, 1).reshape(n, nb * k), batch2.reshape(nb * k, m),
                           alpha=alpha)
    for b in range(nb):
        result = torch.addmm(result, batch1[b], batch2[b], alpha=alpha)
    return result


@register("addbmm.out")
def addbmm_out(self, batch1, batch2, *, beta=1, alpha=1, out):
    """aten.addbmm (out=)."""
    return write_out(out, addbmm(self, batch1, batch2, beta=beta, alpha=alpha))


@register("addbmm_")
def addbmm_inplace(self, batch1, batch2, *, beta=1, alpha=1):
    """Tensor.addbmm_."""
    return self.copy_(addbmm(self, batch1, batch2, beta=beta, alpha=alpha))
