"""Aten kernels for reductions through the kernel library (kernels/reduce.py: multi-pass, any size, every
storage dtype): sum, mean, prod, amax/amin, max/min(dim), argmax/argmin, var/std(_mean), vector norms,
all/any, count_nonzero, logsumexp, nansum; and cumsum/cumprod scans."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..kernels.launch import DeviceCaps
from ..kernels.reduce import ReduceProblem, plan_reduce, record_plan
from .codegen.dtypes import dtype_info
from .codegen.elementwise import launch
from .elementwise import operand
from .integer_scans import integer_cumsum
from .library_launch import device_caps
from .registry import register
from .scans import blocked_scan
from .tensor_buffers import buffer_id, new_empty, runtime


def _dims(x: torch.Tensor, dim) -> tuple[int, ...]:
    """Normalised reduced dims; None or [] mean all dims."""
    nd = x.dim()
    if dim is None:
        return tuple(range(nd))
    if isinstance(dim, int):
        dim = [dim]
    if len(dim) == 0:
        return tuple(range(nd))
    out = []
    for d in dim:
        if nd == 0:
            if d not in (0, -1):
                raise IndexError(f"Dimension out of range (expected to be in range of [-1, 0], but got {d})")
            continue
        if not -nd <= d < nd:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], "
                             f"but got {d})")
        out.append(d % nd)
    if len(set(out)) != len(out):
        raise RuntimeError(f"dim {out} appears multiple times in the list of dims")
    return tuple(sorted(out))


def _out_shape(x: torch.Tensor, dims: Sequence[int], keepdim: bool) -> tuple[int, ...]:
    return tuple(1 if d in dims else s for d, s in enumerate(x.shape) if keepdim or d not in dims)


def cast_into(src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    """Convert-copy `src` into `dst` elementwise (any dtypes the kernels hold, dst may be strided)."""
    if src.shape != dst.shape:
        src = src.expand(dst.shape)
    di = dtype_info(dst.dtype)
    dtype_info(src.dtype)
    if di.packed and not dst.is_contiguous():
        tmp = new_empty(dst.shape, dst.dtype, dst)
        cast_into(src, tmp)
        dst.copy_(tmp)
        return dst
    # the load already converts each element to the destination's compute kind
    launch("cast", "a", di.kind, [operand(src).expand(tuple(dst.shape))], operand(dst))
    return dst


def _finish(op: str, values: torch.Tensor, result_dtype: torch.dtype,
            out: torch.Tensor | None) -> torch.Tensor:
    if out is not None:
        if not torch.can_cast(result_dtype, out.dtype):
            raise RuntimeError(f"{op}: result type {result_dtype} can't be cast to the desired output type "
                               f"{out.dtype}")
        if out.shape != values.shape:
            out.resize_(values.shape)
        if out.dtype == values.dtype and out.is_contiguous():
            out.copy_(values)
            return out
        return cast_into(values, out)
    if values.dtype != result_dtype:
        return cast_into(values, new_empty(values.shape, result_dtype, values))
    return values


# what a reduction over zero elements gives (torch's identities; NaN for mean/var/std)
_EMPTY_VALUE = {"sum_i64": 0, "prod_i64": 1,
                "sum": 0.0, "nansum": 0.0, "prod": 1.0, "all": 1.0, "any": 0.0, "norm1": 0.0, "norm2": 0.0,
                "norm0": 0.0, "normp": 0.0, "norm_inf": 0.0, "logsumexp": float("-inf"),
                "count_nonzero": 0.0}

_EXACT_IN_F32 = (torch.float32, torch.float16, torch.bfloat16, torch.int16, torch.int8, torch.uint8,
                 torch.bool)


# storage dtypes the kernel library reads (kernels/reduce.py)
LIBRARY_DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.int32: "i32",
                  torch.int16: "i16", torch.int8: "i8", torch.uint8: "u8", torch.bool: "bool",
                  torch.int64: "i64"}
# the spec names of this module -> the library's op names (max/min with indices are arg reductions)
_LIBRARY_OP = {"max": "argmax", "min": "argmin", "sum_i64": "sum", "prod_i64": "prod"}
_OUT_DTYPE = {"f32": torch.float32, "i32": torch.int32, "u32": torch.int32, "i64": torch.int64}


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def as_rows(x: torch.Tensor, dims: Sequence[int]) -> tuple[torch.Tensor, int, int, int]:
    """x as a contiguous [outer, length, inner] block with `dims` in the middle (copies only when the
    layout needs it): (tensor, outer, length, inner)."""
    if x.dim() == 0:
        return x, 1, 1, 1
    red = [d for d in dims if x.shape[d] != 1]
    if x.is_contiguous():
        if not red:
            return x, x.numel(), 1, 1
        between = [d for d in range(red[0], red[-1] + 1) if d not in red and x.shape[d] != 1]
        if not between:
            return (x, _numel(x.shape[:red[0]]), _numel(x.shape[d] for d in red),
                    _numel(x.shape[red[-1] + 1:]))
    kept = [d for d in range(x.dim()) if d not in dims]
    y = x.permute(kept + list(dims))
    if not y.is_contiguous():
        y = y.contiguous()
    return y, _numel(x.shape[d] for d in kept), _numel(x.shape[d] for d in dims), 1


def library_reduce(op: str, x: torch.Tensor, dims: Sequence[int], shape: Sequence[int], compute: str,
                   scalar: float = 0.0, with_index: bool = False, caps: DeviceCaps | None = None,
                   variant: str | None = None):
    """Run library reduction `op` of x over `dims` into new tensors of `shape`: values (dtype of the
    op's output kind) and, with `with_index`, int64 indices (`caps`/`variant`: override the device's)."""
    y, outer, length, inner = as_rows(x, dims)
    problem = ReduceProblem(op, LIBRARY_DTYPES[x.dtype], outer, length, inner, offset=y.storage_offset(),
                            compute=compute, scalar=scalar, with_index=with_index,
                            x_buffer_bytes=runtime().buffer(buffer_id(y)).aligned_nbytes)
    values = new_empty(shape, _OUT_DTYPE[problem.out_dtype()], x)
    indices = new_empty(shape, torch.int64, x) if with_index else None
    plan = plan_reduce(problem, caps or device_caps(), variant)
    operands = {"x": buffer_id(y), "out": buffer_id(values)}
    if indices is not None:
        operands["index"] = buffer_id(indices)
    scratch = [new_empty((-(-n // 4),), torch.int32, x) for n in plan.scratch.values()]
    operands.update({role: buffer_id(t) for role, t in zip(plan.scratch, scratch, strict=True)})
    record_plan(plan, operands)
    return values, indices


_FLOAT_ONLY = {"mean": "mean(): could not infer output dtype. Input dtype must be either a floating point "
                       "or complex dtype. Got: {name}",
               "var": "std and var only support floating point and complex dtypes",
               "std": "std and var only support floating point and complex dtypes"}
_TORCH_NAMES = {torch.int32: "Int", torch.int64: "Long", torch.int16: "Short", torch.int8: "Char",
                torch.uint8: "Byte", torch.bool: "Bool"}
_INT_EXACT = {"sum_i64", "prod_i64", "amax", "amin", "max", "min", "argmax", "argmin", "any", "all",
              "count_nonzero"}


def reduce(op: str, spec: str, x: torch.Tensor, dim, keepdim: bool, result_dtype: torch.dtype,
           out: torch.Tensor | None = None, scalars: dict | None = None, empty_error: bool = False,
           with_index: bool = False):
    """Run reduction `spec` of x over `dim`; returns values (and int64 indices when with_index)."""
    if result_dtype == torch.int64 and spec in ("sum", "prod", "nansum") and not x.dtype.is_floating_point:
        spec = ("sum" if spec == "nansum" else spec) + "_i64"  # exact integer sums/products in int64
    if x.dtype not in LIBRARY_DTYPES:
        dtype_info(x.dtype, op)
        raise TypeError(f"webgpu: '{op}' does not support {x.dtype} inputs")
    dtype_info(result_dtype, op)
    exact = not x.dtype.is_floating_point and spec in _INT_EXACT
    if x.dtype == torch.int64 and not exact:
        x = x.float()  # int64 elements reduce exactly only; float results (dtype=, logsumexp) via f32
    compute = ("l" if x.dtype == torch.int64 else "i") if exact else "f"
    dims = _dims(x, dim)
    shape = _out_shape(x, dims, keepdim)
    if empty_error and x.numel() == 0:
        raise IndexError(f"{op}(): Expected reduction dim to be specified for input.numel() == 0. "
                         f"Specify the reduction dim with the 'dim' argument.")
    if x.numel() == 0 or not _numel(shape):
        return _empty_result(op, spec, x, shape, result_dtype, out, with_index)
    scalar = float(next(iter(scalars.values()))) if scalars else 0.0
    values, indices = library_reduce(_LIBRARY_OP.get(spec, spec), x, dims if x.dim() else (), shape,
                                     compute, scalar, with_index)
    if values.dtype == torch.int32 and spec in ("any", "all"):
        values = values != 0
    return (values, indices) if with_index else _finish(op, values, result_dtype, out)


def _empty_result(op, spec, x, shape, result_dtype, out, with_index):
    values = new_empty(shape, torch.int64 if spec.endswith("_i64") else torch.float32, x)
    indices = new_empty(shape, torch.int64, x) if with_index else None
    if values.numel():
        values.fill_(_EMPTY_VALUE.get(spec, float("nan")))
        if indices is not None:
            indices.zero_()
    if with_index:
        return values, indices
    return _finish(op, values, result_dtype, out)


def _float_result(op: str, x: torch.Tensor, dtype) -> torch.dtype:
    if dtype is not None:
        return dtype
    if x.dtype.is_floating_point:
        return x.dtype
    message = _FLOAT_ONLY.get(op, f"{op}: Expected a floating point or complex tensor as input. Got {{name}}")
    raise RuntimeError(message.format(name=_TORCH_NAMES.get(x.dtype, str(x.dtype))))


def _sum_dtype(op: str, x: torch.Tensor, dtype) -> torch.dtype:
    if dtype is not None:
        return dtype
    return x.dtype if x.dtype.is_floating_point else torch.int64


# ---- sum / mean / prod / nansum ------------------------------------------------------------------------


@register("sum.dim_IntList")
def sum_dim(self, dim, keepdim=False, *, dtype=None):
    """torch.sum(dim=...)."""
    return reduce("sum", "sum", self, dim, keepdim, _sum_dtype("sum", self, dtype))


@register("sum.IntList_out")
def sum_out(self, dim, keepdim=False, *, dtype=None, out):
    """torch.sum(dim=..., out=)."""
    return reduce("sum", "sum", self, dim, keepdim, _sum_dtype("sum", self, dtype), out)


@register("sum")
def sum_all(self, *, dtype=None):
    """torch.sum()."""
    return reduce("sum", "sum", self, None, False, _sum_dtype("sum", self, dtype))


@register("nansum")
def nansum(self, dim=None, keepdim=False, *, dtype=None):
    """torch.nansum."""
    return reduce("nansum", "nansum", self, dim, keepdim, _sum_dtype("nansum", self, dtype))


@register("mean.dim")
def mean_dim(self, dim, keepdim=False, *, dtype=None):
    """torch.mean(dim=...)."""
    return reduce("mean", "mean", self, dim, keepdim, _float_result("mean", self, dtype))


@register("mean.out")
def mean_out(self, dim, keepdim=False, *, dtype=None, out):
    """torch.mean(dim=..., out=)."""
    return reduce("mean", "mean", self, dim, keepdim, _float_result("mean", self, dtype), out)


@register("mean")
def mean_all(self, *, dtype=None):
    """torch.mean()."""
    return reduce("mean", "mean", self, None, False, _float_result("mean", self, dtype))


@register("prod.dim_int")
def prod_dim(self, dim, keepdim=False, *, dtype=None):
    """torch.prod(dim=...)."""
    return reduce("prod", "prod", self, dim, keepdim, _sum_dtype("prod", self, dtype))


@register("prod.int_out")
def prod_out(self, dim, keepdim=False, *, dtype=None, out):
    """torch.prod(dim=..., out=)."""
    return reduce("prod", "prod", self, dim, keepdim, _sum_dtype("prod", self, dtype), out)


@register("prod")
def prod_all(self, *, dtype=None):
    """torch.prod()."""
    return reduce("prod", "prod", self, None, False, _sum_dtype("prod", self, dtype))


# ---- amax / amin / max / min / argmax / argmin ------------------------------------------------------------


def _minmax(op: str, spec: str, self, dim, keepdim, out=None):
    if self.numel() == 0 and (_dims(self, dim) and any(self.shape[d] == 0 for d in _dims(self, dim))):
        raise IndexError(f"{op}(): Expected reduction dim {list(_dims(self, dim))} to have non-zero size.")
    return reduce(op, spec, self, dim, keepdim, self.dtype, out)


@register("amax")
def amax(self, dim=(), keepdim=False):
    """torch.amax."""
    return _minmax("amax", "amax", self, dim, keepdim)


@register("amax.out")
def amax_out(self, dim=(), keepdim=False, *, out):
    """torch.amax(out=)."""
    return _minmax("amax", "amax", self, dim, keepdim, out)


@register("amin")
def amin(self, dim=(), keepdim=False):
    """torch.amin."""
    return _minmax("amin", "amin", self, dim, keepdim)


@register("amin.out")
def amin_out(self, dim=(), keepdim=False, *, out):
    """torch.amin(out=)."""
    return _minmax("amin", "amin", self, dim, keepdim, out)


@register("max")
def max_all(self):
    """torch.max() of all elements."""
    if self.numel() == 0:
        raise RuntimeError("max(): Expected reduction dim to be specified for input.numel() == 0. "
                           "Specify the reduction dim with the 'dim' argument.")
    return reduce("max", "amax", self, None, False, self.dtype)


@register("min")
def min_all(self):
    """torch.min() of all elements."""
    if self.numel() == 0:
        raise RuntimeError("min(): Expected reduction dim to be specified for input.numel() == 0. "
                           "Specify the reduction dim with the 'dim' argument.")
    return reduce("min", "amin", self, None, False, self.dtype)


def _with_indices(op: str, self, dim, keepdim):
    dims = _dims(self, dim)
    if self.dim() and self.shape[dims[0]] == 0:
        raise IndexError(f"{op}(): Expected reduction dim {dims[0]} to have non-zero size.")
    values, indices = reduce(op, op, self, dim, keepdim, self.dtype, with_index=True)
    if values.dtype != self.dtype:
        values = cast_into(values, new_empty(values.shape, self.dtype, values))
    return values, indices


@register("max.dim")
def max_dim(self, dim, keepdim=False):
    """torch.max(dim=) -> (values, indices)."""
    return _with_indices("max", self, dim, keepdim)


@register("min.dim")
def min_dim(self, dim, keepdim=False):
    """torch.min(dim=) -> (values, indices)."""
    return _with_indices("min", self, dim, keepdim)


@register("max.dim_max")
def max_dim_out(self, dim, keepdim=False, *, max, max_values):  # noqa: A002
    """torch.max(dim=, out=(values, indices))."""
    v, i = _with_indices("max", self, dim, keepdim)
    return _finish("max", v, self.dtype, max), _finish("max", i, torch.int64, max_values)


@register("min.dim_min")
def min_dim_out(self, dim, keepdim=False, *, min, min_indices):  # noqa: A002
    """torch.min(dim=, out=(values, indices))."""
    v, i = _with_indices("min", self, dim, keepdim)
    return _finish("min", v, self.dtype, min), _finish("min", i, torch.int64, min_indices)


def _arg(op: str, self, dim, keepdim, out=None):
    if self.numel() == 0:
        raise IndexError(f"{op}(): Expected reduction dim to be specified for input.numel() == 0.")
    if dim is None:
        flat = self.reshape(-1)
        _, idx = reduce(op, op, flat, 0, False, self.dtype, with_index=True)
        if keepdim:
            idx = idx.reshape((1,) * self.dim())
    else:
        _, idx = reduce(op, op, self, dim, keepdim, self.dtype, with_index=True)
    return _finish(op, idx, torch.int64, out)


@register("argmax")
def argmax(self, dim=None, keepdim=False):
    """torch.argmax."""
    return _arg("argmax", self, dim, keepdim)


@register("argmax.out")
def argmax_out(self, dim=None, keepdim=False, *, out):
    """torch.argmax(out=)."""
    return _arg("argmax", self, dim, keepdim, out)


@register("argmin")
def argmin(self, dim=None, keepdim=False):
    """torch.argmin."""
    return _arg("argmin", self, dim, keepdim)


@register("argmin.out")
def argmin_out(self, dim=None, keepdim=False, *, out):
    """torch.argmin(out=)."""
    return _arg("argmin", self, dim, keepdim, out)


# ---- var / std -------------------------------------------------------------------------------------------


def _correction(correction) -> float:
    return 1.0 if correction is None else float(correction)


@register("var.correction")
def var(self, dim=None, *, correction=None, keepdim=False):
    """torch.var."""
    return reduce("var", "var", self, dim, keepdim, _float_result("var", self, None),
                  scalars={"correction": _correction(correction)})


@register("var.correction_out")
def var_out(self, dim=None, *, correction=None, keepdim=False, out):
    """torch.var(out=)."""
    return reduce("var", "var", self, dim, keepdim, _float_result("var", self, None), out,
                  scalars={"correction": _correction(correction)})


@register("std.correction")
def std(self, dim=None, *, correction=None, keepdim=False):
    """torch.std."""
    return reduce("std", "std", self, dim, keepdim, _float_result("std", self, None),
                  scalars={"correction": _correction(correction)})


@register("std.correction_out")
def std_out(self, dim=None, *, correction=None, keepdim=False, out):
    """torch.std(out=)."""
    return reduce("std", "std", self, dim, keepdim, _float_result("std", self, None), out,
                  scalars={"correction": _correction(correction)})


@register("var_mean.correction")
def var_mean(self, dim=None, *, correction=None, keepdim=False):
    """torch.var_mean."""
    return var(self, dim, correction=correction, keepdim=keepdim), mean_dim(self, dim, keepdim) \
        if dim is not None else mean_dim(self, [], keepdim)


@register("std_mean.correction")
def std_mean(self, dim=None, *, correction=None, keepdim=False):
    """torch.std_mean."""
    return std(self, dim, correction=correction, keepdim=keepdim), mean_dim(self, dim if dim is not None
                                                                             else [], keepdim)


# ---- norms, all/any, logsumexp -----------------------------------------------------------------------


def _norm(self, ord, dim, keepdim, dtype, out=None):  # noqa: A002
    result = _float_result("linalg.vector_norm", self, dtype)
    p = float(ord)
    if p == 2.0:
        return reduce("linalg.vector_norm", "norm2", self, dim, keepdim, result, out)
    if p == 1.0:
        return reduce("linalg.vector_norm", "norm1", self, dim, keepdim, result, out)
    if p == float("inf"):
        return reduce("linalg.vector_norm", "norm_inf", self, dim, keepdim, result, out, empty_error=True)
    if p == float("-inf"):
        return reduce("linalg.vector_norm", "norm_ninf", self, dim, keepdim, result, out, empty_error=True)
    if p == 0.0:
        return reduce("linalg.vector_norm", "norm0", self, dim, keepdim, result, out)
    return reduce("linalg.vector_norm", "normp", self, dim, keepdim, result, out, scalars={"p": p})


@register("linalg_vector_norm")
def vector_norm(self, ord=2, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """torch.linalg.vector_norm (torch.norm routes here)."""
    return _norm(self, ord, dim, keepdim, dtype)


@register("norm.ScalarOpt_dim", "norm.Scalar", "norm.ScalarOpt_dim_dtype", "norm.ScalarOpt_dtype")
def norm(self, p=2, dim=None, keepdim=False, *, dtype=None):
    """torch.norm (vector norms)."""
    return _norm(self, 2 if p is None else p, dim, keepdim, dtype)


@register("norm.out", "norm.dtype_out", "norm.Scalar_out", "norm.ScalarOpt_dtype_out")
def norm_out(self, p=2, dim=None, keepdim=False, *, dtype=None, out):
    """torch.norm(out=)."""
    return _norm(self, 2 if p is None else p, dim, keepdim, dtype, out)


@register("linalg_vector_norm.out")
def vector_norm_out(self, ord=2, dim=None, keepdim=False, *, dtype=None, out):  # noqa: A002
    """torch.linalg.vector_norm(out=)."""
    return _norm(self, ord, dim, keepdim, dtype, out)


def _bool_reduce(op: str, self, dim, keepdim, out=None):
    result = torch.uint8 if self.dtype == torch.uint8 else torch.bool
    return reduce(op, op, self, dim, keepdim, result, out)


# One kernel per variant family: the overloads differ only in which arguments they may omit.
@register("all", "all.dims", "all.dim")
def all_(self, dim=None, keepdim=False):
    """torch.all (whole tensor, one dim or several)."""
    return _bool_reduce("all", self, dim, keepdim)


@register("all.out", "all.dims_out", "all.all_out")
def all_out(self, dim=None, keepdim=False, *, out):
    """torch.all(..., out=)."""
    return _bool_reduce("all", self, dim, keepdim, out)


# One kernel per variant family: the overloads differ only in which arguments they may omit.
@register("any", "any.dims", "any.dim")
def any_(self, dim=None, keepdim=False):
    """torch.any (whole tensor, one dim or several)."""
    return _bool_reduce("any", self, dim, keepdim)


@register("any.out", "any.dims_out", "any.all_out")
def any_out(self, dim=None, keepdim=False, *, out):
    """torch.any(..., out=)."""
    return _bool_reduce("any", self, dim, keepdim, out)


@register("logsumexp")
def logsumexp(self, dim, keepdim=False):
    """torch.logsumexp."""
    result = self.dtype if self.dtype.is_floating_point else torch.get_default_dtype()
    return reduce("logsumexp", "logsumexp", self, dim, keepdim, result)


@register("logsumexp.out")
def logsumexp_out(self, dim, keepdim=False, *, out):
    """torch.logsumexp(out=)."""
    result = self.dtype if self.dtype.is_floating_point else torch.get_default_dtype()
    return reduce("logsumexp", "logsumexp", self, dim, keepdim, result, out)


# ---- scans -----------------------------------------------------------------------------------------------

def _rows_scan(op: str, self, dim: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The blocked scan (ops/scans.py) of `self` along `dim`: float32 values (and int64 indices for
    cummax/cummin) in self's shape."""
    x = self if self.dim() else self.reshape(1)
    dim = dim % x.dim()
    moved = x.movedim(dim, -1)
    rows = moved.numel() // max(moved.shape[-1], 1)
    flat = moved.to(torch.float32).contiguous().reshape(rows, moved.shape[-1])
    y, idx = blocked_scan(op, flat)
    back = lambda t: t.reshape(moved.shape).movedim(-1, dim).reshape(self.shape)  # noqa: E731
    return back(y), None if idx is None else back(idx)


def _scan(op: str, self, dim: int, dtype, out=None):
    if op == "cumsum" and not self.dtype.is_floating_point and not (dtype and dtype.is_floating_point):
        return _finish(op, integer_cumsum(self, dim), dtype or torch.int64, out)  # exact, in u32 pairs
    result = dtype or (self.dtype if self.dtype.is_floating_point else None)
    if result is None:
        raise TypeError(f"webgpu: '{op}' of {self.dtype} returns int64, not supported yet; pass "
                        f"dtype=torch.float32")
    y = _rows_scan(op, self, dim)[0]
    if out is None:
        res = new_empty(self.shape, result, self)
        return cast_into(y, res)
    if out.shape != self.shape:
        out.resize_(self.shape)
    return cast_into(y, out)


@register("cumsum")
def cumsum(self, dim, *, dtype=None):
    """torch.cumsum."""
    return _scan("cumsum", self, dim, dtype)


@register("cumsum.out")
def cumsum_out(self, dim, *, dtype=None, out):
    """torch.cumsum(out=)."""
    return _scan("cumsum", self, dim, dtype, out)


@register("cumsum_")
def cumsum_inplace(self, dim, *, dtype=None):
    """Tensor.cumsum_."""
    return _scan("cumsum", self, dim, dtype, self)


@register("cumprod")
def cumprod(self, dim, *, dtype=None):
    """torch.cumprod."""
    return _scan("cumprod", self, dim, dtype)


@register("cumprod.out")
def cumprod_out(self, dim, *, dtype=None, out):
    """torch.cumprod(out=)."""
    return _scan("cumprod", self, dim, dtype, out)


@register("cumprod_")
def cumprod_inplace(self, dim, *, dtype=None):
    """Tensor.cumprod_."""
    return _scan("cumprod", self, dim, dtype, self)


@register("_logcumsumexp")
def logcumsumexp(self, dim):
    """torch.logcumsumexp."""
    return _scan("logcumsumexp", self, dim, None)


@register("_logcumsumexp.out")
def logcumsumexp_out(self, dim, *, out):
    """torch.logcumsumexp(out=)."""
    return _scan("logcumsumexp", self, dim, None, out)


# ---- small composites ------------------------------------------------------------------------------


@register("trace")
def trace(self):
    """torch.trace (sum of the diagonal view)."""
    if self.dim() != 2:
        raise RuntimeError("trace: expected a matrix")
    return self.diagonal().sum()


@register("count_nonzero.dim_IntList")
def count_nonzero_dims(self, dim):
    """torch.count_nonzero(dim=[...]) -> int64 (one library reduction)."""
    return reduce("count_nonzero", "count_nonzero", self, list(dim), False, torch.int64)


@register("count_nonzero")
def count_nonzero(self, dim=None):
    """torch.count_nonzero(dim=int|None) -> int64 (one library reduction)."""
    return reduce("count_nonzero", "count_nonzero", self, dim, False, torch.int64)


@register("aminmax")
def aminmax(self, *, dim=None, keepdim=False):
    """torch.aminmax -> (min, max)."""
    if dim is None:
        lo, hi = self.amin(), self.amax()
        if keepdim:
            shape = (1,) * self.dim()
            lo, hi = lo.reshape(shape), hi.reshape(shape)
        return lo, hi
    return self.amin(dim, keepdim), self.amax(dim, keepdim)


@register("aminmax.out")
def aminmax_out(self, *, dim=None, keepdim=False, min, max):  # noqa: A002
    """torch.aminmax(out=(min, max))."""
    lo, hi = aminmax(self, dim=dim, keepdim=keepdim)
    min.resize_(lo.shape)
    max.resize_(hi.shape)
    return min.copy_(lo), max.copy_(hi)


def _cum_extreme(op: str, self, values, indices, dim):
    if self.dtype not in _EXACT_IN_F32:
        raise TypeError(f"webgpu: '{op}' of {self.dtype} is not supported yet")
    y, idx = _rows_scan(op, self, dim)
    values.resize_(self.shape)
    indices.resize_(self.shape)
    cast_into(y, values)
    indices.copy_(idx)


@register("_cummax_helper")
def cummax_helper(self, values, indices, dim):
    """aten._cummax_helper (torch.cummax writes through it)."""
    _cum_extreme("cummax", self, values, indices, dim)


@register("_cummin_helper")
def cummin_helper(self, values, indices, dim):
    """aten._cummin_helper (torch.cummin writes through it)."""
    _cum_extreme("cummin", self, values, indices, dim)
