"""torch-webgpu: PyTorch on WebGPU — an eager `webgpu` device and a torch.compile backend."""

from __future__ import annotations

__version__ = "0.1.0"

from . import runtime  # noqa: E402  (the HAL needs neither torch nor the compiler)
