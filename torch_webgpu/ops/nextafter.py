"""nextafter: the next representable value of self toward other, stepped on the bits of the result dtype
(float32, float16 and bfloat16 each have their own step; computing float16 in float32 would round back)."""

from __future__ import annotations

import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND as PROMOTION
from torch._prims_common import elementwise_dtypes

from .elementwise import broadcast_shapes, prepare_out, run_formula
from .registry import register

_FORMULA = {torch.float32: "nextafter_(a, b)", torch.float16: "nextafter16_(a, b)",
            torch.bfloat16: "nextafterbf16_(a, b)"}


def _nextafter(self, other, out=None, inplace=False):
    _, dtype = elementwise_dtypes(self, other, type_promotion_kind=PROMOTION.DEFAULT)
    if dtype not in _FORMULA:
        raise RuntimeError(f"\"nextafter_cpu\" not implemented for '{dtype}' on webgpu (float32, float16 and "
                           "bfloat16 are supported)")
    shape = broadcast_shapes(self.shape, other.shape)
    dst = prepare_out("nextafter", shape, dtype, out, self if inplace else None, self)
    a, b = self.to(dtype), other.to(dtype)
    return run_formula("nextafter", _FORMULA[dtype], "f32", shape, (a, b), "ab", [], dst)


@register("nextafter")
def nextafter(self, other):
    """torch.nextafter."""
    return _nextafter(self, other)


@register("nextafter.out")
def nextafter_out(self, other, *, out):
    """torch.nextafter (out=)."""
    return _nextafter(self, other, out=out)


@register("nextafter_")
def nextafter_inplace(self, other):
    """Tensor.nextafter_."""
    return _nextafter(self, other, inplace=True)
