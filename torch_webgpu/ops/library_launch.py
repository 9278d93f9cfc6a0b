"""Eager use of the kernel library (torch_webgpu/kernels): the runtime's caps and recording a launch with
webgpu tensors bound by role."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from ..kernels import DeviceCaps, KernelLaunch, record
from .codegen.recording import dispatch
from .tensor_buffers import buffer_id, runtime

WGSL_DTYPES = {torch.float32: "f32", torch.float16: "f16"}


_caps: dict[int, DeviceCaps] = {}


def device_caps() -> DeviceCaps:
    """What library variants the eager device may use (its adapter's features and limits; cached per
    runtime)."""
    rt = runtime()
    caps = _caps.get(id(rt))
    if caps is None:
        caps = _caps[id(rt)] = DeviceCaps.from_runtime(rt)
    return caps


def library_dtype(*tensors: torch.Tensor | None) -> str | None:
    """The library storage type shared by every given tensor ("f32"/"f16"), or None when the library
    cannot run them (another dtype, mixed dtypes, f16 without `shader-f16`)."""
    dtypes = {t.dtype for t in tensors if t is not None}
    if len(dtypes) != 1:
        return None
    name = WGSL_DTYPES.get(dtypes.pop())
    if name == "f16" and not device_caps().shader_f16:
        return None
    return name


def record_launch(launch: KernelLaunch, tensors: Mapping[str, torch.Tensor]) -> None:
    """Record `launch` with each role's tensor bound as its whole buffer (offsets travel in params)."""
    record(launch, {role: buffer_id(t) for role, t in tensors.items()}, runtime(), dispatch)
