"""torchao weight-only quantized weights as the library's quant kernels read them: which ones qualify and
their parts (shared by the eager quant_linear and quant_embedding routes)."""

from __future__ import annotations

from typing import Any

import torch


def plain(t: Any, dtype: torch.dtype | None = None) -> bool:
    """A plain contiguous webgpu tensor (of `dtype`, if given): what a kernel binds as it is."""
    return (type(t) in (torch.Tensor, torch.nn.Parameter) and t.device.type == "webgpu"
            and t.is_contiguous() and (dtype is None or t.dtype == dtype))


def weight_parts(w: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, int] | None:
    """(q [N, K] int8, scale [N, G], zero [N, G] or None, group) of a supported torchao weight, else None."""
    q, scale, zero = getattr(w, "qdata", None), getattr(w, "scale", None), getattr(w, "zero_point", None)
    block = tuple(getattr(w, "block_size", ()) or ())
    if getattr(w, "activation_quantization", None) is not None or getattr(w, "act_quant_kwargs", None):
        return None
    if getattr(w, "act_pre_scale", None) is not None:
        return None
    if not plain(q, torch.int8) or q.dim() != 2 or len(block) != 2 or block[0] != 1:
        return None
    n, k = q.shape
    group = int(block[1])
    if not plain(scale) or scale.numel() != n * (k // group) or q.storage_offset() or scale.storage_offset():
        return None
    if type(w).__name__ == "Int8Tensor":
        zero = None   # symmetric: torchao's linear ignores its (zero) zero points
    elif zero is not None:
        if not plain(zero, torch.int8) or zero.numel() != scale.numel() or zero.storage_offset() or (
                zero.numel() % 4):
            return None
    return q, scale, zero, group
