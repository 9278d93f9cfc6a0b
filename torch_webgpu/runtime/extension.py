"""The C++ extension `torch_webgpu._native_plan` on the runtime's Dawn device: loading it (once per process,
Dawn backend only), the C handles behind wgpudawn objects, and the Dawn errors reported while it ran.

`torch_webgpu._native_plan` (csrc/native_plan/, CPython only, no torch) calls Dawn through the function
addresses of wgpudawn's own Dawn, handed over here, so it drives the runtime's device, buffers and queue.
The queue's submit and wait (native_queue.py) and recorded command programs (native.py) build on it.
"""

from __future__ import annotations

import logging
from typing import Any

# Dawn entry points, in the order of csrc/native_plan/dawn_procs.h DawnProcs.
PROCS = (
    "wgpuDeviceCreateBindGroup", "wgpuBindGroupRelease", "wgpuCommandEncoderBeginComputePass",
    "wgpuCommandEncoderCopyBufferToBuffer", "wgpuCommandEncoderClearBuffer",
    "wgpuComputePassEncoderSetPipeline", "wgpuComputePassEncoderSetBindGroup",
    "wgpuComputePassEncoderDispatchWorkgroups", "wgpuComputePassEncoderEnd", "wgpuComputePassEncoderRelease",
    "wgpuBufferAddRef", "wgpuBufferRelease", "wgpuComputePipelineAddRef", "wgpuComputePipelineRelease",
    "wgpuBindGroupLayoutAddRef", "wgpuBindGroupLayoutRelease", "wgpuDeviceAddRef", "wgpuDeviceRelease",
    "wgpuCommandEncoderFinish", "wgpuQueueSubmit", "wgpuCommandBufferRelease",
    "wgpuDeviceCreateCommandEncoder", "wgpuCommandEncoderRelease", "wgpuQueueOnSubmittedWorkDone",
    "wgpuInstanceWaitAny", "wgpuBufferMapAsync", "wgpuBufferGetConstMappedRange", "wgpuBufferUnmap",
)
_STRUCTS = ("WGPUBindGroupEntry", "WGPUBindGroupDescriptor", "WGPUComputePassDescriptor",
            "WGPUQueueWorkDoneCallbackInfo", "WGPUFutureWaitInfo", "WGPUFuture",
            "WGPUCommandEncoderDescriptor", "WGPUBufferMapCallbackInfo")
# webgpu.h enum values the C++ side compiles in (checked against wgpudawn's lib at load).
_ENUMS = ("WGPUCallbackMode_WaitAnyOnly", "WGPUQueueWorkDoneStatus_Success", "WGPUWaitStatus_Success",
          "WGPUWaitStatus_TimedOut", "WGPUMapAsyncStatus_Success", "WGPUMapMode_Read")

module: Any = None   # the loaded extension, once `load` succeeded
_unavailable: str | None = None


class _NoErrors:
    pending: list = []


error_handler: Any = _NoErrors()   # wgpudawn's ErrorHandler once the module is loaded


def load(backend: str) -> Any:
    """The initialised extension module for a runtime of `backend`, or None (with the reason in
    `unavailable_reason`)."""
    global module, _unavailable, error_handler
    if backend != "dawn":
        # per runtime, not cached: one process may hold Dawn and wgpu-native runtimes side by side, and
        # Dawn's procs called on a wgpu-native handle would crash
        return None
    if module is not None or _unavailable is not None:
        return module
    try:
        from wgpudawn.backends.dawn._ffi import ffi, lib

        from torch_webgpu import _native_plan
    except ImportError as exc:
        _unavailable = f"extension not built ({exc}); run tools/build_extension_inplace.sh or pip install"
        logging.getLogger(__name__).warning("native plan executor unavailable: %s", _unavailable)
        return None
    try:
        addresses = tuple(int(ffi.cast("uintptr_t", ffi.addressof(lib, name))) for name in PROCS)
        _native_plan.set_procs(addresses, tuple(ffi.sizeof(s) for s in _STRUCTS),
                               tuple(int(getattr(lib, name)) for name in _ENUMS))
    except (AttributeError, RuntimeError, TypeError, ValueError) as exc:   # another wgpudawn/Dawn or build
        _unavailable = f"{exc}"
        logging.getLogger(__name__).warning("native plan executor unavailable, using Python's: %s", exc)
        return None
    from wgpudawn.backends.dawn._api import error_handler as handler
    error_handler = handler
    module = _native_plan
    return module


def unavailable_reason(backend: str | None = None) -> str | None:
    """Why the extension cannot be used (on a runtime of `backend`, if given; None when it can or was not
    tried)."""
    if backend is not None and backend != "dawn":
        return f"backend {backend!r} (the native executor drives Dawn through wgpudawn)"
    return _unavailable


def handle(obj: Any) -> int:
    """The C handle (WGPU* pointer) behind a wgpudawn object."""
    return int(_cast("uintptr_t", obj._internal))


HANDLES: dict[int, int] = {}   # GPU buffer serial -> WGPUBuffer handle (serials are never reused)
_MAX_HANDLES = 1 << 16


def buffer_handle(buf: Any) -> int:
    """The WGPUBuffer handle of a runtime DeviceBuffer, cached by its GPU buffer's serial (a cffi cast
    per binding per call adds up on the hot paths)."""
    h = HANDLES.get(buf.serial)
    if h is None:
        if len(HANDLES) >= _MAX_HANDLES:
            HANDLES.clear()
        h = HANDLES[buf.serial] = handle(buf.gpu)
    return h


def _cast(*args: Any) -> Any:
    global _cast
    from wgpudawn.backends.dawn._ffi import ffi

    _cast = ffi.cast
    return ffi.cast(*args)


def raise_dawn_errors(what: str) -> None:
    """Raise the Dawn validation errors reported while native code ran (as ValidationError)."""
    if not error_handler.pending:
        return
    from .errors import ValidationError

    errors, error_handler.pending[:] = list(error_handler.pending), []
    raise ValidationError(f"{what}: " + "; ".join(message for _, message in errors))
