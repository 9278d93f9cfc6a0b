"""torch.compile backend for WebGPU (`backend="webgpu"` once this package is imported)."""

try:
    import torch as _torch  # noqa: F401
except ImportError:  # torch-free process: only low_ir and lowering (saved plans, bundles) are usable
    _torch = None

if _torch is not None:
    from .webgpu_compiler import webgpu_backend

__all__ = ["webgpu_backend"]
