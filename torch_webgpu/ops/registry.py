"""Registering aten kernels for the `webgpu` device (dispatch key PrivateUse1).

Every eager kernel of the device is a Python function registered for one or more aten overloads:

    from torch_webgpu.ops.registry import register
    from torch_webgpu.ops.tensor_buffers import buffer_id, new_empty

    @register("abs.out")
    def abs_out(self, *, out):
        ...                       # dispatch a WGSL kernel on buffer_id(self) -> buffer_id(out)
        return out

Names are aten overload names as in native_functions.yaml ("add.Tensor", "sum.IntList_out"); a bare
name means the default overload. Structured ops reach backends as their `.out` variants, so register
those. Any aten op left unregistered runs on the CPU through the boxed fallback (see ops/fallback.py),
which counts it in `torch_webgpu.fallback_stats()`.

The storage of a webgpu tensor is a runtime buffer: `data_ptr()` is `buffer_id << 32` plus the byte
offset of the view; ops/tensor_buffers.py turns tensors into (buffer id, element offset) pairs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import torch

from . import launch_cache

F = TypeVar("F", bound=Callable)

DISPATCH_KEY = "PrivateUse1"
_LIB = torch.library.Library("aten", "IMPL", DISPATCH_KEY)  # noqa: TOR901 (kept alive for the process)
_REGISTERED: dict[str, Callable] = {}


def register(*op_names: str, planned: bool = True) -> Callable[[F], F]:
    """Decorator: register the function as the webgpu kernel of each named aten overload.

    Repeated call signatures replay a launch plan (ops/launch_cache.py), which checks that a call's
    work can be replayed; `planned=False` opts a kernel out.
    """
    if not op_names:
        raise ValueError("register() needs at least one aten op name, e.g. register('abs.out')")

    def decorate(fn: F) -> F:
        impl = launch_cache.planned(fn) if planned else fn
        for name in op_names:
            if name in _REGISTERED:
                raise RuntimeError(f"aten::{name} already has a webgpu kernel "
                                   f"({_REGISTERED[name].__module__}.{_REGISTERED[name].__qualname__})")
            _LIB.impl(name, impl)
            _REGISTERED[name] = impl
        return fn

    return decorate


def registered_ops() -> frozenset[str]:
    """The aten overload names that have a Python webgpu kernel."""
    return frozenset(_REGISTERED)


def is_registered(op_name: str) -> bool:
    """True if aten::op_name has a Python webgpu kernel."""
    return op_name in _REGISTERED
