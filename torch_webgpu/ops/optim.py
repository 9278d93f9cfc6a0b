"""The `_foreach_*` ops torch.optim uses (SGD with momentum, Adam, AdamW), so optimizer.step() stays on the
device: each list op runs the matching elementwise webgpu kernel per tensor (all recorded, no submit)."""

from __future__ import annotations

import torch

from .elementwise import is_composite_implicit, overload_names
from .registry import is_registered, register

_UNARY = ("sqrt", "exp", "log", "abs", "neg", "reciprocal", "sign", "sigmoid", "tanh", "ceil", "floor",
          "round", "trunc", "frac", "sin", "cos", "erf", "expm1", "log1p", "log2", "log10", "rsqrt", "lgamma",
          "zero")
_BINARY = ("add", "sub", "mul", "div", "maximum", "minimum", "pow", "clamp_min", "clamp_max", "copy")
_TERNARY = ("addcmul", "addcdiv", "lerp")
_KWARGS = {"alpha", "value"}


def _element_args(name: str, schema, bound: dict, i: int) -> tuple[list, dict]:
    args, kwargs = [], {}
    for a in schema.arguments[1:]:
        if a.is_out or a.name not in bound:
            continue
        v = bound[a.name]
        t = str(a.type)
        if t.startswith("List[") or t.endswith("[]"):
            v = v[i]
        elif a.name == "scalars" and isinstance(v, torch.Tensor):
            v = v[i].item()
        if a.name in _KWARGS or (a.name == "scalars" and name in ("addcmul", "addcdiv")):
            kwargs["value" if a.name == "scalars" else a.name] = v
        else:
            args.append(v)
    return args, kwargs


def _make(name: str, schema, inplace: bool):
    arg_names = [a.name for a in schema.arguments]
    defaults = {a.name: a.default_value for a in schema.arguments if a.has_default_value}

    def kernel(*args, **kwargs):
        bound = dict(defaults)
        bound.update(zip(arg_names, args, strict=False))
        bound.update(kwargs)
        first = bound[arg_names[0]]
        results = []
        for i, x in enumerate(first):
            eargs, ekw = _element_args(name, schema, bound, i)
            if name == "zero":
                x.zero_()
            elif name == "copy":
                x.copy_(eargs[0])
            elif inplace:
                getattr(x, name + "_")(*eargs, **ekw)
            else:
                results.append(getattr(torch, name)(x, *eargs, **ekw))
        return None if inplace else results

    kernel.__name__ = f"foreach_{name}_webgpu"
    return kernel


def register_foreach() -> list[str]:
    """Register every _foreach_ overload of the listed ops whose first argument is the tensor list."""
    done = []
    for name in (*_UNARY, *_BINARY, *_TERNARY):
        for packet, inplace in ((f"_foreach_{name}", False), (f"_foreach_{name}_", True)):
            for qualified in overload_names(packet):
                if is_registered(qualified) or is_composite_implicit(qualified):
                    continue
                base, _, ov = qualified.partition(".")
                schema = getattr(getattr(torch.ops.aten, base), ov or "default")._schema
                if any(a.is_out for a in schema.arguments) or str(schema.arguments[0].type) not in (
                        "List[Tensor]", "Tensor[]"):
                    continue
                if not inplace and name in ("zero", "copy"):
                    continue
                register(qualified)(_make(name, schema, inplace))
                done.append(qualified)
    return done


REGISTERED = register_foreach()
