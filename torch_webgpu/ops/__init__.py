"""Aten kernels of the `webgpu` device; importing this package registers them all.

Infrastructure (device engineer): registry, tensor_buffers, dtypes, strided, producers, copy,
factories, random, views, buffer_ops, fallback. Op families (elementwise, reductions, linalg, nn, ...)
are discovered: every public module of this package is imported, so a new family registers itself
by existing.
"""

from __future__ import annotations

import importlib
import pkgutil

from . import buffer_ops, copy, factories, fallback, random, tensor_buffers, views  # noqa: F401


def _import_families() -> None:
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not module.name.startswith("_"):
            importlib.import_module(f"{__name__}.{module.name}")


_import_families()
