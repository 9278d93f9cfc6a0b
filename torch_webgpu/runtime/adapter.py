"""Adapter selection and device creation with the adapter's own limits and the features worth having."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from torch_webgpu.config import ADAPTER, DAWN_TOGGLES, SUBGROUP_SIZE

from .errors import NoAdapterError

# Features that change what kernels can do; requested whenever the adapter offers them.
WANTED_FEATURES = ("shader-f16", "timestamp-query", "subgroups", "chromium-experimental-subgroup-matrix",
                   "subgroup-size-control")

# Dawn instance toggles: NVIDIA's Vulkan adapters offer shader-f16 and subgroup matrices (tensor cores)
# only with them. TORCH_WEBGPU_DAWN_TOGGLES=0 leaves the instance at Dawn's defaults.
DAWN_INSTANCE_TOGGLES = ("allow_unsafe_apis", "vulkan_enable_f16_on_nvidia")
# Dawn rounds GPU timestamps to ~33 µs unless unsafe APIs are on and this is off: the autotuner and the
# per-dispatch profiler need the real resolution.
DAWN_DISABLED_TOGGLES = ("timestamp_quantization",)
# TORCH_WEBGPU_DAWN_TOGGLES=fast: also what ONNX Runtime's WebGPU EP gives its Dawn device — shaders
# without Tint's bounds clamping, and new buffers not zero-filled before their first use (torch.empty
# is uninitialised on CUDA too). A kernel that reads out of bounds is then undefined, not clamped.
DAWN_FAST_TOGGLES = ("disable_robustness",)
DAWN_FAST_DISABLED_TOGGLES = ("lazy_clear_resource_on_first_use",)
_instance_toggles: tuple[str, ...] | None = None  # what the Dawn instance of this process got

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
    # (component, result component, M, N, K) of each subgroup-matrix shape the device has (tensor cores)
    subgroup_matrix_configs: tuple[tuple[str, str, int, int, int], ...] = ()
    toggles: tuple[str, ...] = ()  # the Dawn instance toggles in effect

    @property
    def software(self) -> bool:
        """True for a software adapter (lavapipe, SwiftShader): its "GPU" work runs on the host's cores."""
        return self.adapter_type.lower() in ("cpu", "cpu_adapter")

    def describe(self) -> str:
        """A multi-line human-readable summary."""
        lines = [
            f"adapter: {self.name} ({self.adapter_type}, {self.backend_type} via {self.backend})",
            f"  vendor={self.vendor} architecture={self.architecture}",
            f"  {self.description}",
            f"  features: {', '.join(sorted(self.features)) or '-'}",
            f"  toggles: {', '.join(self.toggles) or '-'}",
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
    size = SUBGROUP_SIZE.read()
    if size is not None:
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


def wanted_toggles() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(enabled, disabled) Dawn toggles for TORCH_WEBGPU_DAWN_TOGGLES: 0, 1 (the default) or fast."""
    value = DAWN_TOGGLES.read()
    if value == "0":
        return (), ()
    if value == "fast":
        return DAWN_INSTANCE_TOGGLES + DAWN_FAST_TOGGLES, DAWN_DISABLED_TOGGLES + DAWN_FAST_DISABLED_TOGGLES
    return DAWN_INSTANCE_TOGGLES, DAWN_DISABLED_TOGGLES


def configure_instance(gpu_module: ModuleType) -> tuple[str, ...]:
    """Create Dawn's instance with the wanted toggles, once per process (before the first adapter);
    returns the toggles in effect (none on wgpu-native, or when the instance already existed)."""
    global _instance_toggles
    if _instance_toggles is not None:
        return _instance_toggles
    toggles: tuple[str, ...] = ()
    if gpu_module.__name__.split(".")[0] == "wgpudawn":
        from wgpudawn.backends.dawn import extras  # only on the Dawn backend

        wanted, unwanted = wanted_toggles()
        known = extras.all_toggles()
        wanted = tuple(t for t in wanted if t in known)
        off = [t for t in unwanted if t in known]
        try:
            extras.set_instance_extras(enable_toggles=list(wanted), disable_toggles=off)
            toggles = wanted
        except RuntimeError:
            toggles = ()  # someone created the instance first (toggles cannot be added later)
    _instance_toggles = toggles
    return toggles


def subgroup_matrix_configs(adapter: Any) -> tuple[tuple[str, str, int, int, int], ...]:
    """(component, result, M, N, K) of the adapter's subgroup-matrix shapes (Dawn only; else ())."""
    if "chromium-experimental-subgroup-matrix" not in set(adapter.features):
        return ()
    try:
        from wgpudawn.backends.dawn import extras
    except ImportError:
        return ()
    configs = extras.get_adapter_properties(adapter).get("subgroup_matrix_configs", ())
    return tuple((str(c["component_type"]), str(c["result_component_type"]), int(c["m"]), int(c["n"]),
                  int(c["k"])) for c in configs)


def select_adapter(gpu_module: ModuleType, spec: str | None = None) -> Any:
    """The adapter named by `spec` (index or name substring), else the high-performance one."""
    spec = spec if spec is not None else ADAPTER.read()
    configure_instance(gpu_module)
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
    configs = subgroup_matrix_configs(adapter)  # before request_device: that consumes the adapter
    adapter_limits = dict(adapter.limits)
    limits = {k: adapter_limits[k] for k in COMPUTE_LIMITS if k in adapter_limits}
    device = adapter.request_device_sync(
        label="torch-webgpu", required_features=features, required_limits=limits
    )
    info = _info_dict(adapter)
    granted = dict(device.limits) | _subgroup_sizes(info)
    granted_features = frozenset(str(f) for f in device.features)
    if "chromium-experimental-subgroup-matrix" not in granted_features:
        configs = ()
    return device, DeviceInfo(
        backend=backend,
        name=_adapter_name(adapter),
        vendor=str(info.get("vendor", "")),
        architecture=str(info.get("architecture", "")),
        adapter_type=str(info.get("adapter_type", "")),
        backend_type=str(info.get("backend_type", "")),
        description=str(info.get("description", "")),
        limits={k: int(v) for k, v in granted.items() if isinstance(v, int)},
        features=granted_features,
        subgroup_matrix_configs=configs,
        toggles=_instance_toggles or (),
    )
