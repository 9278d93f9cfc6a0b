"""The Dawn-backed WebGPU HAL: adapter/device, buffers, kernels, command recording, profiling."""

from .adapter import DeviceInfo
from .backend import backend_name
from .buffers import DeviceBuffer, align_up
from .errors import (
    DeviceLostError,
    GraphCaptureError,
    LimitExceededError,
    NoAdapterError,
    OutOfMemoryError,
    ShaderCompilationError,
    ValidationError,
    WebGPUError,
)
from .executables import Kernel
from .profiling import DispatchTiming
from .runtime import BufferSlice, Constant, Runtime, device_info, get_runtime, runtime_initialized

__all__ = [
    "BufferSlice", "Constant", "DeviceBuffer", "DeviceInfo", "DeviceLostError", "DispatchTiming",
    "GraphCaptureError", "Kernel",
    "LimitExceededError", "NoAdapterError", "OutOfMemoryError", "Runtime", "ShaderCompilationError",
    "ValidationError", "WebGPUError", "align_up", "backend_name", "device_info", "get_runtime",
    "runtime_initialized",
]
