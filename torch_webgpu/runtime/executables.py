"""Shader modules, compute pipelines and bind groups, cached by content."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from .errors import ShaderCompilationError, ValidationError


@dataclass(eq=False)
class Kernel:
    """A compute pipeline ready to dispatch; `key` is the content hash it is cached under."""

    key: str
    label: str
    pipeline: Any
    entry_point: str
    _layouts: dict[int, Any] = field(default_factory=dict)

    def layout(self, group: int) -> Any:
        """The (auto-derived) bind group layout of `group`."""
        if group not in self._layouts:
            self._layouts[group] = self.pipeline.get_bind_group_layout(group)
        return self._layouts[group]


def content_key(code: str | bytes, entry_point: str, constants: dict | None = None) -> str:
    """Hash of a shader's source, entry point and override constants."""
    h = hashlib.sha256()
    h.update(code.encode() if isinstance(code, str) else bytes(code))
    h.update(b"\0" + entry_point.encode())
    if constants:
        h.update(repr(sorted(constants.items())).encode())
    return h.hexdigest()


# Bind groups kept for reuse. Each live one holds a descriptor set, and drivers keep descriptor pools at
# their high-water mark (lavapipe maps every set as its own memfd page: ~20k sets in one test process
# crossed the kernel's 65530-mapping limit and crashed inside Dawn). Past this many the cache starts over.
MAX_BIND_GROUPS = 4096


class ExecutableCache:
    """Creates each pipeline once per content hash and each bind group once per resource tuple (at most
    `max_bind_groups` of those at a time)."""

    def __init__(self, device: Any, max_bind_groups: int = MAX_BIND_GROUPS):
        self._device = device
        self._kernels: dict[str, Kernel] = {}
        self._bind_groups: dict[tuple, Any] = {}
        self._keys_by_serial: dict[int, set[tuple]] = defaultdict(set)
        self.max_bind_groups = max_bind_groups
        self.on_clear: list[Any] = []   # callbacks dropping other caches of the same bind groups
        self.pipeline_hits = 0
        self.pipeline_misses = 0
        self.bind_group_hits = 0
        self.bind_group_misses = 0

    def kernel(self, code: str | bytes, entry_point: str | None = "main", label: str | None = None,
               constants: dict[str, float] | None = None) -> Kernel:
        """The compute pipeline for WGSL text or SPIR-V bytes, compiled at most once.

        `entry_point=None` takes the module's only entry point (Tint renames SPIR-V entry points whose
        names are not valid WGSL identifiers, such as IREE's `...$async_dispatch_0`).
        """
        key = content_key(code, entry_point or "", constants)
        kernel = self._kernels.get(key)
        if kernel is not None:
            self.pipeline_hits += 1
            return kernel
        self.pipeline_misses += 1
        label = label or f"kernel-{key[:12]}"
        source = code if isinstance(code, str) else None
        try:
            module = self._device.create_shader_module(
                code=code if isinstance(code, str) else bytes(code), label=label)
        except Exception as exc:
            raise ShaderCompilationError(label, str(exc), source) from exc
        compute: dict[str, Any] = {"module": module}
        if entry_point is not None:
            compute["entry_point"] = entry_point
        if constants:
            compute["constants"] = dict(constants)
        try:
            pipeline = self._device.create_compute_pipeline(layout="auto", compute=compute, label=label)
        except Exception as exc:
            raise ShaderCompilationError(label, str(exc), source) from exc
        kernel = Kernel(key, label, pipeline, entry_point or "")
        self._kernels[key] = kernel
        return kernel

    def bind_group(self, kernel: Kernel, group: int, resources: tuple) -> Any:
        """A bind group of `resources` = ((gpu_buffer, serial, offset, size), ...) by binding index."""
        key = (kernel.key, group, tuple([r[1:] for r in resources]))  # (serial, offset, size) each
        bind_group = self._bind_groups.get(key)
        if bind_group is not None:
            self.bind_group_hits += 1
            return bind_group
        self.bind_group_misses += 1
        if len(self._bind_groups) >= self.max_bind_groups:
            self.clear_bind_groups()
        entries = [
            {"binding": i, "resource": {"buffer": gpu, "offset": off, "size": size}}
            for i, (gpu, _, off, size) in enumerate(resources)
        ]
        try:
            bind_group = self._device.create_bind_group(
                layout=kernel.layout(group), entries=entries, label=kernel.label)
        except Exception as exc:
            raise ValidationError(f"kernel '{kernel.label}': bad bindings: {exc}") from exc
        self._bind_groups[key] = bind_group
        for _, serial, _, _ in resources:
            self._keys_by_serial[serial].add(key)
        return bind_group

    def clear_bind_groups(self) -> None:
        """Drop every cached bind group (and, through `on_clear`, the other caches holding them), so
        their descriptor sets are freed once recorded commands no longer need them."""
        self._bind_groups.clear()
        self._keys_by_serial.clear()
        for callback in self.on_clear:
            callback()

    @property
    def bind_groups(self) -> int:
        """How many bind groups the cache holds."""
        return len(self._bind_groups)

    def forget_buffer(self, serial: int) -> None:
        """Drop cached bind groups that reference a GPU buffer about to be destroyed."""
        for key in self._keys_by_serial.pop(serial, ()):
            self._bind_groups.pop(key, None)

    def __len__(self) -> int:
        return len(self._kernels)
