"""torch.compile backend for WebGPU (`backend="webgpu"` once this package is imported). It needs torch; the
plans it produces run without it (torch_webgpu.plan)."""

from .webgpu_compiler import webgpu_backend

__all__ = ["webgpu_backend"]
