"""The torch-level backends a benchmark can run on, each with its device, wrapper and synchronisation."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

RUNTIME_BACKENDS = ("dawn", "wgpu")  # raw runtime (no torch): tiny-dispatch cost
TORCH_BACKENDS = ("webgpu-compiled", "webgpu-eager", "torch-cpu", "torch-cuda", "inductor-cuda")
ALL_BACKENDS = RUNTIME_BACKENDS + TORCH_BACKENDS


@dataclass(frozen=True)
class TorchBackend:
    """How to place inputs, wrap a function and wait for the device, for one backend."""

    name: str
    device: str
    wrap: Callable[[Callable], Callable]
    synchronize: Callable[[], None]


def _identity(fn: Callable) -> Callable:
    return fn


def available_torch_backends(requested: list[str]) -> list[TorchBackend]:
    """The requested torch-level backends that this machine can run (CUDA ones only with a GPU)."""
    import torch

    out = []
    for name in requested:
        if name in ("webgpu-eager", "webgpu-compiled"):
            import torch_webgpu  # noqa: F401  (registers the device)

            if name == "webgpu-compiled":
                try:
                    from torch_webgpu.compiler.webgpu_compiler import webgpu_backend
                except ImportError:  # no compiler on this machine (e.g. a GPU box without IREE wheels)
                    continue

                def wrap(fn, _backend=webgpu_backend):
                    return torch.compile(fn, backend=_backend)
            else:
                wrap = _identity
            out.append(TorchBackend(name, "webgpu", wrap, torch.webgpu.synchronize))
        elif name == "torch-cpu":
            out.append(TorchBackend(name, "cpu", _identity, lambda: None))
        elif name in ("torch-cuda", "inductor-cuda") and torch.cuda.is_available():
            torch.backends.cuda.matmul.allow_tf32 = False  # compare f32 with f32
            torch.backends.cudnn.allow_tf32 = False
            wrap = torch.compile if name == "inductor-cuda" else _identity
            out.append(TorchBackend(name, "cuda", wrap, torch.cuda.synchronize))
    return out
