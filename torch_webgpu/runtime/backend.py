"""Which Python WebGPU binding the runtime drives: wgpudawn (Dawn, default) or wgpu-py (wgpu-native)."""

from __future__ import annotations

import importlib
from types import ModuleType

from torch_webgpu.config import BACKEND

BACKENDS = {"dawn": "wgpudawn", "wgpu": "wgpu"}


def backend_name() -> str:
    """The backend chosen by TORCH_WEBGPU_BACKEND (`dawn` or `wgpu`; default `dawn`)."""
    return BACKEND.read()


def load_backend(name: str | None = None) -> ModuleType:
    """Import the binding module for `name` (or the configured backend)."""
    name = name or backend_name()
    module = BACKENDS[name]
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        extra = " (pip install 'torch-webgpu[wgpu]')" if name == "wgpu" else ""
        raise ImportError(f"WebGPU backend {name!r} needs the {module!r} package{extra}") from exc
