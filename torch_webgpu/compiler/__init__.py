"""torch.compile backend for WebGPU (`backend="webgpu"` once this package is imported)."""

from .webgpu_compiler import webgpu_backend

__all__ = ["webgpu_backend"]
