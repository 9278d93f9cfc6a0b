"""frexp: x = mantissa * 2**exponent with |mantissa| in [0.5, 1), split from the float bits on the device."""

from __future__ import annotations

import torch

from .codegen.dtypes import dtype_info
from .elementwise import run_formula
from .out_args import write_out
from .registry import register
from .tensor_buffers import new_empty


@register("frexp.Tensor")
def frexp(self):
    """aten.frexp -> (mantissa in self's dtype, int32 exponent)."""
    if not self.dtype.is_floating_point:
        raise RuntimeError(f"torch.frexp() only supports floating-point dtypes, got {self.dtype}")
    dtype_info(self.dtype, "frexp")
    mantissa = new_empty(self.shape, self.dtype, self)
    exponent = new_empty(self.shape, torch.int32, self)
    if self.numel():
        run_formula("frexp", "frexp_mantissa_(a)", "f32", self.shape, [self], "a", [], mantissa)
        run_formula("frexp", "frexp_exponent_(a)", "f32", self.shape, [self], "a", [], exponent, "i32")
    return mantissa, exponent


@register("frexp.Tensor_out")
def frexp_out(self, *, mantissa, exponent):
    """aten.frexp (out=)."""
    if exponent.dtype != torch.int32:
        raise RuntimeError(f"torch.frexp() expects exponent to have int dtype but got {exponent.dtype}")
    m, e = frexp(self)
    return write_out(mantissa, m), write_out(exponent, e)
