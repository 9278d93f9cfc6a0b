"""The decompositions AOTAutograd applies for the webgpu backend: torch-mlir's table, with eval batch
norm written in the fewest ops. torch's own decomposition of `_native_batch_norm_legit_no_training`
traces about twenty ops (copies of the statistics, two unsqueezes per vector, dtype round trips), each
one a fake-tensor dispatch: ~25 ms per batch norm, 1-2 s of a MobileNetV2's compile. The lean form
keeps the pattern families/conv.py folds into a convolution's epilogue."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import torch

aten = torch.ops.aten
_EVAL_BATCH_NORM = aten._native_batch_norm_legit_no_training.default


@lru_cache(maxsize=1)
def decomposition_table() -> dict[Any, Any]:
    """torch-mlir's decomposition table with the lean eval batch norm (built once per process)."""
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table

    table = dict(get_decomposition_table())
    fallback = table.get(_EVAL_BATCH_NORM)
    if fallback is None:
        from torch._decomp.decompositions import _native_batch_norm_legit_no_training as fallback

    def eval_batch_norm(input, weight, bias, running_mean, running_var, momentum, eps):
        """`(x - mean) * invstd * weight + bias` per channel, invstd = 1 / sqrt(var + eps) (float32
        with float32 statistics; other dtypes compute in float32 through torch's decomposition)."""
        vectors = (weight, bias, running_mean, running_var)
        if input.dtype != torch.float32 or input.dim() < 2 or any(
                t is not None and t.dtype != torch.float32 for t in vectors):
            return fallback(input, weight, bias, running_mean, running_var, momentum, eps)
        shape = [input.shape[1]] + [1] * (input.dim() - 2)
        invstd = aten.reciprocal.default(aten.sqrt.default(aten.add.Tensor(running_var, eps)))
        out = aten.mul.Tensor(aten.sub.Tensor(input, aten.view.default(running_mean, shape)),
                              aten.view.default(invstd, shape))
        if weight is not None:
            out = aten.mul.Tensor(out, aten.view.default(weight, shape))
        if bias is not None:
            out = aten.add.Tensor(out, aten.view.default(bias, shape))
        # (the saved statistics: fresh tensors, as torch's decomposition returns on a non-CPU device)
        return out, aten.clone.default(running_mean), invstd

    table[_EVAL_BATCH_NORM] = eval_batch_norm
    return table
