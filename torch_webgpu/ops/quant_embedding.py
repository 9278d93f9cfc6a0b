"""Eager torchao-quantized embeddings on webgpu tensors through the library's quant_embedding kernel.

torchao's `IntxUnpackedToInt8Tensor` and `Int8Tensor` implement `F.embedding` / `aten.embedding` by
dequantizing the whole table and gathering from it (which runs on the device through the existing ops,
but materialises the float table per call). `quant_linear.install` wraps those implementations: a
lookup whose ids and table parts are webgpu tensors the kernel reads runs as one quant_embedding
dispatch that dequantizes only the gathered rows; anything else goes to torchao's implementation.
"""

from __future__ import annotations

from typing import Any

import torch

from ..kernels.quant_embedding import QuantEmbeddingProblem, plan_quant_embedding
from ..kernels.quant_matmul import QuantWeight
from .library_launch import WGSL_DTYPES, device_caps, record_launch
from .quant_weights import plain, weight_parts
from .tensor_buffers import new_empty

_WRAPPED = "_torch_webgpu_quant_embedding"


def quant_embedding(w: Any, ids: torch.Tensor) -> torch.Tensor | None:
    """dequant(w)[ids] as one quant_embedding dispatch, or None when the kernel cannot run it."""
    parts = weight_parts(w)
    if parts is None or not plain(ids) or ids.dtype not in (torch.int32, torch.int64) or ids.numel() == 0:
        return None
    q, scale, zero, group = parts
    if type(w).__name__ == "Int8Tensor" and getattr(w, "zero_point", None) is not None:
        zero = w.zero_point   # torchao's embedding dequantizes with it (zeros when symmetric)
        if not plain(zero, torch.int8) or zero.numel() != scale.numel() or zero.storage_offset() or (
                zero.numel() % 4):
            return None
    dtype = getattr(w, "dtype", None)
    if dtype not in WGSL_DTYPES or scale.dtype not in WGSL_DTYPES:
        return None
    rows, dim = q.shape
    weight = QuantWeight("i8", group, zero is not None, WGSL_DTYPES[scale.dtype])
    p = QuantEmbeddingProblem(rows, dim, ids.numel(), weight, WGSL_DTYPES[dtype],
                              ids_offset=ids.storage_offset(), ids_words=ids.element_size() // 4)
    try:
        launch = plan_quant_embedding(p, device_caps())
    except (ValueError, TypeError):
        return None
    out = new_empty((*ids.shape, dim), dtype, like=ids)
    tensors = {"ids": ids, "q": q, "scale": scale, "out": out}
    if zero is not None:
        tensors["zero"] = zero
    record_launch(launch, tensors)
    return out


def wrap_embedding(original: Any) -> Any:
    """torchao's embedding implementation `original`, routed to `quant_embedding` where it applies."""
    if getattr(original, _WRAPPED, False):
        return original

    def embedding(func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        # F.embedding(ids, weight) and aten.embedding(weight, ids): the quantized one is the table
        first, second = args[0], args[1]
        w, ids = (second, first) if isinstance(first, torch.Tensor) and type(first) is torch.Tensor else (
            first, second)
        if not torch.compiler.is_compiling() and not isinstance(ids, torch._subclasses.FakeTensor):
            out = quant_embedding(w, ids)
            if out is not None:
                return out
        return original(func, types, args, kwargs)

    setattr(embedding, _WRAPPED, True)
    return embedding
