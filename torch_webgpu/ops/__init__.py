"""Aten kernels of the `webgpu` device; importing this package registers them all.

Infrastructure (device engineer): registry, tensor_buffers, dtypes, copy, factories, random, views,
fallback. Op families (eager-ops engineer) add their modules to `_FAMILIES` below.
"""

from __future__ import annotations

import importlib

from . import buffer_ops, copy, factories, fallback, random, tensor_buffers, views  # noqa: F401

# Op-family modules imported when present, so families can land independently.
_FAMILIES = ("elementwise", "reductions", "linalg", "nn", "indexing", "optim")

for _name in _FAMILIES:
    try:
        importlib.import_module(f"{__name__}.{_name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{_name}":
            raise
