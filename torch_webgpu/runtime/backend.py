"""Which Python WebGPU binding the runtime drives: wgpudawn (Dawn, default) or wgpu-py (wgpu-native)."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

BACKENDS = {"dawn": "wgpudawn", "wgpu": "wgpu"}


def backend_name() -> str:
    """The backend chosen by TORCH_WEBGPU_BACKEND (`dawn` or `wgpu`; default `dawn`)."""
    name = os.environ.get("TORCH_WEBGPU_BACKEND", "dawn").strip().lower() or "dawn"
    if name == "wgpudawn":
        name = "dawn"
    if name not in BACKENDS:
        raise ValueError(f"TORCH_WEBGPU_BACKEND={name!r} is not one of {sorted(BACKENDS)}")
    return name


def load_backend(name: str | None = None) -> ModuleType:
    """Import the binding module for `name` (or the configured backend)."""
    name = name or backend_name()
    module = BACKENDS[name]
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        extra = " (pip install 'torch-webgpu[wgpu]')" if name == "wgpu" else ""
        raise ImportError(f"WebGPU backend {name!r} needs the {module!r} package{extra}") from exc
