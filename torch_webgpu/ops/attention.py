"""aten.scaled_dot_product_attention on the kernel library's flash attention (kernels/attention.py).

SDPA is CompositeImplicitAutograd: on a backend without a fused-kernel choice ATen runs its math
decomposition (matmul, softmax, matmul). The webgpu device registers the op itself, twice:
- AutogradPrivateUse1: when autograd must record (an input requires grad under grad mode) it runs
  ATen's math decomposition, so gradients flow through ops that have backward formulas; otherwise it
  goes below autograd to
- PrivateUse1: the library kernel where it applies (f32/f16, 3-d or 4-d inputs, bool or same-dtype
  additive mask, no dropout), else the math decomposition.
"""

from __future__ import annotations

import dataclasses

import torch

from ..kernels.attention import FAMILY, AttentionProblem, Strided, variants
from . import launch_cache
from .library_launch import device_caps, library_dtype, run_family
from .tensor_buffers import buffer_id, new_empty

_OP = "scaled_dot_product_attention"
_SDPA = torch.ops.aten.scaled_dot_product_attention.default  # the overload: no per-call overload lookup
_LIB = torch.library.Library("aten", "IMPL")  # noqa: TOR901 (kept alive for the process)


def _math(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa) -> torch.Tensor:
    return torch.ops.aten._scaled_dot_product_attention_math(
        query, key, value, attn_mask, dropout_p, is_causal, None, scale=scale, enable_gqa=enable_gqa)[0]


def _strided(t: torch.Tensor) -> Strided:
    return Strided(t.storage_offset(), tuple(t.stride()))


def _library_problem(q, k, v, mask, dropout_p, is_causal, scale, enable_gqa):
    """(problem, 4-d operands) when the library kernel computes this call exactly, else None."""
    if dropout_p != 0.0 or q.dim() not in (3, 4) or not (q.dim() == k.dim() == v.dim()):
        return None
    dtype = library_dtype(q, k, v)
    if dtype is None or (mask is not None and mask.dtype not in (torch.bool, q.dtype)):
        return None
    if any(t is not None and t.device.type != "webgpu" for t in (q, k, v, mask)):
        return None
    if mask is not None and is_causal:
        return None  # ATen refuses this combination: let the math path say so
    if q.dim() == 3:
        q, k, v = q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1)
        mask = mask.unsqueeze(-3) if mask is not None and mask.dim() >= 3 else mask
    b, hq, lq, d = q.shape
    hk, lk, dv = k.shape[1], k.shape[2], v.shape[3]
    if (k.shape[0], v.shape[0]) != (b, b) or k.shape[3] != d or v.shape[1:3] != (hk, lk):
        return None
    if hk != hq and (not enable_gqa or hq % hk):
        return None
    if min(b, hq, lq, lk, d, dv) == 0:
        return None
    kind = None
    if mask is not None:
        try:
            mask = mask.expand(b, hq, lq, lk)
        except RuntimeError:
            return None
        kind = "bool" if mask.dtype == torch.bool else "additive"
    problem = AttentionProblem(batch=b, heads=hq, lq=lq, lk=lk, d=d, dv=dv, kv_heads=hk,
                               causal=bool(is_causal), mask=kind, scale=scale, dtype=dtype, q=_strided(q),
                               k=_strided(k), v=_strided(v),
                               mask_layout=_strided(mask) if mask is not None else None)
    if not variants(problem, device_caps()):
        return None
    return problem, q, k, v, mask


def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None, enable_gqa=False):
    """aten.scaled_dot_product_attention below autograd: the flash kernel where it applies."""
    found = _library_problem(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    if found is None:
        return _math(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    problem, q, k, v, mask = found
    out = new_empty((problem.batch, problem.heads, problem.lq, problem.value_dim), query.dtype, query)
    problem = dataclasses.replace(problem, out=_strided(out))
    tensors = {"q": q, "k": k, "v": v, "out": out} | ({"mask": mask} if mask is not None else {})
    # a split-K variant (decode-shaped) writes partial states to its scratch, then its combine pass
    run_family(FAMILY, problem, {role: buffer_id(t) for role, t in tensors.items()}, query, tune=False)
    return out.squeeze(1) if query.dim() == 3 else out


def sdpa_autograd(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None,
                  enable_gqa=False):
    """aten.scaled_dot_product_attention at AutogradPrivateUse1: math when gradients are recorded."""
    tensors = (query, key, value, attn_mask)
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors):
        return _math(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    with torch._C._AutoDispatchBelowAutograd():
        return _SDPA(query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)


_LIB.impl(_OP, launch_cache.planned(sdpa), "PrivateUse1")  # repeated calls replay the flash dispatch
_LIB.impl(_OP, sdpa_autograd, "AutogradPrivateUse1")

__all__ = ["sdpa", "sdpa_autograd"]
