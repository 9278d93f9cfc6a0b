"""Aten kernels for the elementwise op table (codegen/op_table.py): type promotion, broadcasting, out=.

Each table entry is registered for every matching aten overload (functional, in-place `op_` and
`.out`, Tensor and Scalar forms) by matching the overload's schema argument names against the entry.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND as PROMOTION
from torch._prims_common import elementwise_dtypes

from .codegen.dtypes import dtype_info
from .codegen.elementwise import Scalar, launch
from .codegen.op_table import OPS, EltOp
from .codegen.operand import Operand
from .registry import is_registered, register
from .tensor_buffers import buffer_id, new_empty

_KINDS = {"default": PROMOTION.DEFAULT, "int_to_float": PROMOTION.INT_TO_FLOAT,
          "always_bool": PROMOTION.ALWAYS_BOOL, "int_only": PROMOTION.DEFAULT, "logical": PROMOTION.DEFAULT}


def operand(t: torch.Tensor) -> Operand:
    """The kernel operand describing a webgpu tensor."""
    return Operand(buffer_id(t), t.storage_offset(), t.dtype, tuple(t.shape), tuple(t.stride()))


def is_scalar(x) -> bool:
    """True for Python numbers and 0-dim CPU tensors (both enter kernels as parameters)."""
    return not isinstance(x, torch.Tensor) or (x.device.type == "cpu" and x.dim() == 0)


def scalar_value(x):
    """A Python number from a number or a 0-dim CPU tensor."""
    return x.item() if isinstance(x, torch.Tensor) else x


def _check_device(op: str, values: Sequence) -> None:
    for x in values:
        if isinstance(x, torch.Tensor) and x.device.type != "webgpu" and not is_scalar(x):
            raise RuntimeError(f"webgpu: '{op}' expected all tensors on webgpu, got one on {x.device}")


def prepare_out(op: str, shape: Sequence[int], result_dtype: torch.dtype, out: torch.Tensor | None,
                inplace: torch.Tensor | None, like: torch.Tensor | None) -> torch.Tensor:
    """The output tensor: a new one, the checked in-place `self`, or a resized `out=`."""
    shape = tuple(shape)
    target = inplace if inplace is not None else out
    if target is None:
        return new_empty(shape, result_dtype, like)
    if not torch.can_cast(result_dtype, target.dtype):
        raise RuntimeError(f"result type {_type_name(result_dtype)} can't be cast to the desired output "
                           f"type {_type_name(target.dtype)}")
    if inplace is not None:
        if tuple(inplace.shape) != shape:
            raise RuntimeError(f"output with shape {list(inplace.shape)} doesn't match the broadcast shape "
                               f"{list(shape)}")
        return inplace
    if tuple(out.shape) != shape:
        out.resize_(shape)
    return out


def _type_name(dtype: torch.dtype) -> str:
    return {torch.float32: "Float", torch.float16: "Half", torch.bfloat16: "BFloat16", torch.int64: "Long",
            torch.int32: "Int", torch.int16: "Short", torch.int8: "Char", torch.uint8: "Byte",
            torch.bool: "Bool", torch.float64: "Double"}.get(dtype, str(dtype))


def run_formula(op: str, expr: str, compute: str, shape: Sequence[int], values: Sequence,
                names: Sequence[str], params: Sequence[Scalar], dst: torch.Tensor,
                out_kind: str | None = None) -> torch.Tensor:
    """Launch `dst = expr(values)`; tensors load through strides, scalars become parameters."""
    inputs, scalars = [], list(params)
    for name, x in zip(names, values, strict=True):
        if is_scalar(x):
            v = scalar_value(x)
            scalars.append(Scalar(name, compute, bool(v) if compute == "bool" else v))
        else:
            inputs.append((name, operand(x).expand(tuple(shape))))
    target = dst
    if dtype_info(dst.dtype, op).packed and not dst.is_contiguous():
        target = new_empty(shape, dst.dtype, dst)
    launch(op, expr, compute, inputs, operand(target), tuple(scalars), out_kind)
    if target is not dst:
        dst.copy_(target)
    return dst


def _formula(spec: EltOp, kind: str, mode_value) -> str:
    formula = {"f32": spec.f, "i32": spec.i, "bool": spec.b, "i64": spec.l}[kind]
    if isinstance(formula, dict):
        key = "" if mode_value is None else mode_value
        if key not in formula:
            raise NotImplementedError(f"webgpu: '{spec.name}' does not support {spec.mode}={mode_value!r}")
        formula = formula[key]
    return formula


def _promote(values: Sequence, promote: str) -> tuple[torch.dtype, torch.dtype]:
    """(compute, result) dtypes; a fast path for all-tensor operands of one dtype, else torch's rules."""
    first = values[0]
    if isinstance(first, torch.Tensor) and all(isinstance(x, torch.Tensor) and x.dtype == first.dtype
                                               and x.device == first.device for x in values):
        dtype = first.dtype
        if promote == "always_bool":
            return dtype, torch.bool
        if promote == "int_to_float" and not dtype.is_floating_point:
            return torch.get_default_dtype(), torch.get_default_dtype()
        return dtype, dtype
    return elementwise_dtypes(*values, type_promotion_kind=_KINDS[promote])


def broadcast_shapes(*shapes) -> torch.Size:
    """torch.broadcast_shapes with a fast path for equal shapes."""
    first = shapes[0]
    if all(s == first for s in shapes):
        return torch.Size(first)
    return torch.broadcast_shapes(*shapes)


def run_elementwise(spec: EltOp, values: Sequence, params: dict, mode_value=None,
                    out: torch.Tensor | None = None, inplace: torch.Tensor | None = None) -> torch.Tensor:
    """Type-promote, broadcast and launch one table op."""
    op = spec.name
    _check_device(op, values)
    promote = spec.promote
    if op == "div" and spec.mode and mode_value is None:
        promote = "int_to_float"  # div(rounding_mode=None) is true division
    if any(isinstance(x, torch.Tensor) and x.is_complex() for x in values):
        from .complex_arith import elementwise as complex_elementwise  # complex64: on (real, imag) views

        return complex_elementwise(op, values, params, out, inplace)
    compute_dtype, result_dtype = _promote(values, promote)
    if promote == "logical":
        compute_dtype = result_dtype = torch.bool
    for x in values:
        if isinstance(x, torch.Tensor):
            dtype_info(x.dtype, op)
    kind = dtype_info(compute_dtype, op).kind
    if promote == "int_only" and kind == "f32":
        raise RuntimeError(f"\"{op}_cpu\" not implemented for '{_type_name(compute_dtype)}'")
    expr = _formula(spec, kind, mode_value)
    if expr is None:
        hint = (" (int64 supports add/sub/mul/div/remainder/pow/neg/abs/min/max/comparisons/bitwise ops; "
                "cast to int32 or float32 for the rest)") if kind == "i64" else ""
        raise TypeError(f"webgpu: '{op}' is not supported for dtype {compute_dtype}{hint}")
    tensors = [x for x in values if not is_scalar(x)]
    shape = broadcast_shapes(*(t.shape for t in tensors)) if tensors else torch.Size([])
    out_kind = "bool" if promote in ("always_bool",) else None
    dst = prepare_out(op, shape, result_dtype, out, inplace, tensors[0] if tensors else None)
    scalars = []
    for name in spec.params:
        v = _param_default(spec, name, params.get(name), result_dtype)
        pk = spec.param_kinds.get(name, kind)
        scalars.append(Scalar(name, pk, bool(v) if pk == "bool" else v))
    names = "abcdefgh"[: len(values)]
    return run_formula(op, expr, kind, shape, values, names, scalars, dst, out_kind)


def _param_default(spec: EltOp, name: str, value, dtype: torch.dtype):
    if value is not None:
        return value
    if spec.name == "nan_to_num":
        info = torch.finfo(dtype) if dtype.is_floating_point else None
        return {"nan": 0.0, "posinf": info.max if info else 0, "neginf": info.min if info else 0}[name]
    if name == "eps":
        return -1.0
    raise RuntimeError(f"webgpu: '{spec.name}' needs argument '{name}'")


# ---- registration ----------------------------------------------------------------------------------


def _schema_matches(spec: EltOp, schema) -> bool:
    names = [a.name for a in schema.arguments if not a.is_out]
    wanted = set(spec.args) | set(spec.params) | ({spec.mode} if spec.mode else set())
    outs = [a for a in schema.arguments if a.is_out]
    if len(outs) > 1 or len(schema.returns) != 1 or set(names) != wanted:
        return False
    types = {a.name: str(a.type) for a in schema.arguments}
    return any(types[n].startswith("Tensor") for n in spec.args)


def _make_kernel(spec: EltOp, schema, inplace: bool) -> Callable:
    arg_names = [a.name for a in schema.arguments]
    defaults = {a.name: a.default_value for a in schema.arguments if a.has_default_value}
    out_name = next((a.name for a in schema.arguments if a.is_out), None)

    def kernel(*args, **kwargs):
        bound = dict(defaults)
        bound.update(zip(arg_names, args, strict=False))
        bound.update(kwargs)
        values = [bound[n] for n in spec.args]
        params = {n: bound.get(n) for n in spec.params}
        mode_value = bound.get(spec.mode) if spec.mode else None
        out = bound.get(out_name) if out_name else None
        return run_elementwise(spec, values, params, mode_value, out=out,
                               inplace=values[0] if inplace else None)

    kernel.__name__ = f"{spec.name}_webgpu"
    return kernel


def overload_names(base: str) -> list[str]:
    """'name.overload' strings of an aten op packet (the default overload as 'name')."""
    packet = getattr(torch.ops.aten, base, None)
    if packet is None:
        return []
    return [base if ov == "default" else f"{base}.{ov}" for ov in packet.overloads()]


def _schema(qualified: str):
    base, _, ov = qualified.partition(".")
    return getattr(getattr(torch.ops.aten, base), ov or "default")._schema


def is_composite_implicit(qualified: str) -> bool:
    """True if aten decomposes this overload itself (a backend kernel would bypass its autograd)."""
    try:
        return torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{qualified}",
                                                              "CompositeImplicitAutograd")
    except RuntimeError:  # a TorchScript-only overload (e.g. neg.int): not a dispatcher op
        return True


def register_table(ops: Sequence[EltOp] = OPS) -> list[str]:
    """Register every matching aten overload of every table op; returns the registered names."""
    done = []
    for spec in ops:
        for base in (spec.name, *spec.aliases):
            for packet, inplace in ((base, False), (base + "_", True)):
                for qualified in overload_names(packet):
                    if is_registered(qualified) or is_composite_implicit(qualified):
                        continue
                    schema = _schema(qualified)
                    if not _schema_matches(spec, schema):
                        continue
                    register(qualified)(_make_kernel(spec, schema, inplace))
                    done.append(qualified)
    return done


REGISTERED = register_table()


# ---- ops whose formula depends on which optional operands are present --------------------------------

_CLAMP = {("f32", True, True): "min_(max_(a, b), c)", ("f32", True, False): "max_(a, b)",
          ("f32", False, True): "min_(a, c)", ("i32", True, True): "min(max(a, b), c)",
          ("i32", True, False): "max(a, b)", ("i32", False, True): "min(a, c)",
          ("i64", True, True): "min64(max64(a, b), c)", ("i64", True, False): "max64(a, b)",
          ("i64", False, True): "min64(a, c)"}


def clamp(self, min=None, max=None, *, out=None, inplace=False):  # noqa: A002 (aten's argument names)
    """clamp / clamp.Tensor and their out= and in-place forms."""
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    present = [x for x in (self, min, max) if x is not None]
    _check_device("clamp", present)
    _, result_dtype = elementwise_dtypes(*present, type_promotion_kind=PROMOTION.DEFAULT)
    kind = dtype_info(result_dtype, "clamp").kind
    if kind == "bool":
        kind = "i32"
    expr = _CLAMP[(kind, min is not None, max is not None)]
    tensors = [x for x in present if not is_scalar(x)]
    shape = torch.broadcast_shapes(*(t.shape for t in tensors))
    dst = prepare_out("clamp", shape, result_dtype, out, self if inplace else None, self)
    values, names = [self], ["a"]
    for x, n in ((min, "b"), (max, "c")):
        if x is not None:
            values.append(x)
            names.append(n)
    return run_formula("clamp", expr, kind, shape, values, names, [], dst)


@register("clamp", "clamp.Tensor")
def clamp_functional(self, min=None, max=None):  # noqa: A002
    """torch.clamp."""
    return clamp(self, min, max)


@register("clamp.out", "clamp.Tensor_out")
def clamp_out(self, min=None, max=None, *, out):  # noqa: A002
    """torch.clamp(out=)."""
    return clamp(self, min, max, out=out)


@register("clamp_", "clamp_.Tensor")
def clamp_inplace(self, min=None, max=None):  # noqa: A002
    """Tensor.clamp_."""
    return clamp(self, min, max, inplace=True)


_WHERE = {"f32": "select(c, b, a != 0.0)", "i32": "select(c, b, a != 0)", "bool": "select(c, b, a)",
          "i64": "select(c, b, i64_to_bool(a))"}


def where(condition, self, other, out=None):
    """torch.where(condition, self, other) with scalar or tensor branches."""
    _check_device("where", (condition, self, other))
    if isinstance(condition, torch.Tensor) and condition.dtype not in (torch.bool, torch.uint8):
        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor with dtype "
                           f"{_type_name(condition.dtype)}")
    _, result_dtype = elementwise_dtypes(self, other, type_promotion_kind=PROMOTION.DEFAULT)
    kind = dtype_info(result_dtype, "where").kind
    tensors = [x for x in (condition, self, other) if not is_scalar(x)]
    shape = torch.broadcast_shapes(*(t.shape for t in tensors))
    dst = prepare_out("where", shape, result_dtype, out, None, tensors[0])
    return run_formula("where", _WHERE[kind], kind, shape, (condition, self, other), "abc", [], dst)


@register("where.self")
def where_functional(condition, self, other):
    """torch.where."""
    return where(condition, self, other)


@register("where.self_out")
def where_out(condition, self, other, *, out):
    """torch.where(out=)."""
    return where(condition, self, other, out)
