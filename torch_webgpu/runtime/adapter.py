"""Adapter selection and device creation with the adapter's own limits and the features worth having."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from .errors import NoAdapterError

# Features that change what kernels can do; requested whenever the adapter offers them.
WANTED_FEATURES = ("shader-f16", "timestamp-query", "subgroups")

# Limits that matter to compute work. Others (vertex, texture, dynamic-offset) are left at their
# defaults: requesting Dawn's raw maxima for those only produces warnings.
COMPUTE_LIMITS = (
    "max-bind-groups",
    "max-bindings-per-bind-group",
    "max-buffer-size",
    "max-compute-invocations-per-workgroup",
    "max-compute-workgroup-size-x",
    "max-compute-workgroup-size-y",
    "max-compute-workgroup-size-z",
    "max-compute-workgroup-storage-size",
    "max-compute-workgroups-per-dimension",
    "max-storage-buffer-binding-size",
    "max-storage-buffers-per-shader-stage",
    "max-uniform-buffer-binding-size",
    "max-uniform-buffers-per-shader-stage",
    "min-storage-buffer-offset-alignment",
    "min-uniform-buffer-offset-alignment",
)


@dataclass(frozen=True)
class DeviceInfo:
    """What was opened: adapter identity, backend, granted limits and features."""

    backend: str
    name: str
    vendor: str
    architecture: str
    adapter_type: str
    backend_type: str
    description: str
    limits: dict[str, int] = field(default_factory=dict)
    features: frozenset[str] = frozenset()

    def describe(self) -> str:
        """A multi-line human-readable summary."""
        lines = [
            f"adapter: {self.name} ({self.adapter_type}, {self.backend_type} via {self.backend})",
            f"  vendor={self.vendor} architecture={self.architecture}",
            f"  {self.description}",
            f"  features: {', '.join(sorted(self.features)) or '-'}",
            "  limits: "
            + ", ".join(f"{k}={self.limits[k]}" for k in COMPUTE_LIMITS if k in self.limits),
        ]
        return "\n".join(lines)


def _info_dict(adapter: Any) -> dict[str, Any]:
    info = adapter.info
    return {k: info[k] for k in info} if hasattr(info, "keys") else dict(info)


def _subgroup_sizes(info: dict[str, Any]) -> dict[str, int]:
    """The adapter's subgroup size range as limits "subgroup-min-size"/"subgroup-max-size" (when known).
    TORCH_WEBGPU_SUBGROUP_SIZE overrides it: 0 hides it (compiled code without subgroups), N declares
    one size N (e.g. 8 on lavapipe, which Dawn reports as 4..128 though every pipeline gets 8)."""
    override = os.environ.get("TORCH_WEBGPU_SUBGROUP_SIZE", "").strip()
    if override:
        if not override.isdigit():
            raise ValueError(f"TORCH_WEBGPU_SUBGROUP_SIZE={override!r}: expected 0 or a subgroup size")
        size = int(override)
        return {"subgroup-min-size": size, "subgroup-max-size": size} if size else {}
    sizes = {}
    # wgpudawn 0.32 spells the adapter-info fields "stackgroup_*"; wgpu-native "subgroup_*".
    for prefix in ("subgroup", "stackgroup"):
        for bound in ("min", "max"):
            value = info.get(f"{prefix}_{bound}_size")
            if isinstance(value, int) and value > 0:
                sizes.setdefault(f"subgroup-{bound}-size", value)
    return sizes


def _adapter_name(adapter: Any) -> str:
    info = _info_dict(adapter)
    return str(info.get("device") or info.get("description") or info.get("vendor") or "unknown")


def select_adapter(gpu_module: ModuleType, spec: str | None = None) -> Any:
    """The adapter named by `spec` (index or name substring), else the high-performance one."""
    spec = spec if spec is not None else os.environ.get("TORCH_WEBGPU_ADAPTER", "").strip()
    gpu = gpu_module.gpu
    if not spec:
        adapter = gpu.request_adapter_sync(power_preference="high-performance")
        if adapter is None:
            raise NoAdapterError(
                "no WebGPU adapter found: install a Vulkan driver (on a machine without a GPU, Mesa's "
                "lavapipe: run the README's set-up) or check VK_DRIVER_FILES"
            )
        return adapter
    adapters = gpu.enumerate_adapters_sync()
    names = [_adapter_name(a) for a in adapters]
    if spec.isdigit():
        index = int(spec)
        if index < len(adapters):
            return adapters[index]
    else:
        for adapter, name in zip(adapters, names, strict=True):
            if spec.lower() in name.lower() or spec.lower() in str(_info_dict(adapter)).lower():
                return adapter
    raise NoAdapterError(f"TORCH_WEBGPU_ADAPTER={spec!r} matches none of the adapters: {names}")


def open_device(adapter: Any, backend: str) -> tuple[Any, DeviceInfo]:
    """Request a device with the adapter's compute limits and the wanted features it offers."""
    offered = set(adapter.features)
    features = [f for f in WANTED_FEATURES if f in offered]
    adapter_limits = dict(adapter.limits)
    limits = {k: adapter_limits[k] for k in COMPUTE_LIMITS if k in adapter_limits}
    device = adapter.request_device_sync(
        label="torch-webgpu", required_features=features, required_limits=limits
    )
    info = _info_dict(adapter)
    granted = dict(device.limits) | _subgroup_sizes(info)
    return device, DeviceInfo(
        backend=backend,
        name=_adapter_name(adapter),
        vendor=str(info.get("vendor", "")),
        architecture=str(info.get("architecture", "")),
        adapter_type=str(info.get("adapter_type", "")),
        backend_type=str(info.get("backend_type", "")),
        description=str(info.get("description", "")),
        limits={k: int(v) for k, v in granted.items() if isinstance(v, int)},
        features=frozenset(str(f) for f in device.features),
    )
