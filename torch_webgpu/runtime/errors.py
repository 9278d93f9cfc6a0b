"""Exceptions raised by the WebGPU runtime; each names what failed and what to do about it."""

from __future__ import annotations

import re


class WebGPUError(RuntimeError):
    """Base class of every error the runtime raises."""


class NoAdapterError(WebGPUError):
    """No WebGPU adapter matched (no driver, or TORCH_WEBGPU_ADAPTER names nothing)."""


class DeviceLostError(WebGPUError):
    """The WebGPU device was lost; the runtime must be re-created."""


class LimitExceededError(WebGPUError, ValueError):
    """A request exceeds one of the device's limits (buffer size, workgroup count, ...)."""


class OutOfMemoryError(WebGPUError, MemoryError):
    """The device could not allocate memory even after emptying the buffer pool."""


class ValidationError(WebGPUError):
    """Dawn / wgpu-native rejected a call (bad bindings, bad dispatch, ...)."""


class ShaderCompilationError(ValidationError):
    """A WGSL or SPIR-V module failed to compile; carries the shader label and line."""

    def __init__(self, label: str, message: str, source: str | None = None):
        self.label = label
        self.line = _first_error_line(message)
        detail = message.strip()
        if self.line is not None and source is not None:
            lines = source.splitlines()
            if 0 < self.line <= len(lines):
                detail += f"\n  line {self.line}: {lines[self.line - 1].strip()}"
        where = f" at line {self.line}" if self.line is not None else ""
        super().__init__(f"shader '{label}' failed to compile{where}: {detail}")


_LINE_RE = re.compile(r":(\d+):(\d+)\s+error")


def _first_error_line(message: str) -> int | None:
    match = _LINE_RE.search(message)
    return int(match.group(1)) if match else None


class GraphCaptureError(WebGPUError):
    """Work that a captured graph (torch.webgpu.graph) cannot replay was requested during capture."""
