"""The one contract between the kernel library and its users (eager ops, compiled plans, bundles).

A library kernel is chosen for a *problem* (shapes, strides, dtypes, epilogue) on a device described by
`DeviceCaps`; the answer is a `KernelLaunch`: WGSL, the grid, and what each @binding holds. Eager ops
record it on the runtime (`record`), the compiler writes it into a plan as a DISPATCH node whose params
travel as push constants through the plan's uniform buffer, so bundles (Python and browser) need no
knowledge of the library.

torch-free: dtypes are WGSL scalar names ("f32", "f16", "i32", "u32").
"""

from __future__ import annotations

import struct
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

PARAMS = "params"   # the binding role of the uniform that holds `KernelLaunch.params`


@dataclass(frozen=True)
class DeviceCaps:
    """What a kernel variant may use: adapter features, limits and a fixed subgroup size (or None)."""

    features: frozenset[str] = frozenset()
    limits: Mapping[str, int] = field(default_factory=dict)
    subgroup_size: int | None = None
    vendor: str = ""
    architecture: str = ""
    subgroup_matrix_configs: tuple[tuple[str, str, int, int, int], ...] = ()  # (in, out, M, N, K)
    driver: str = ""  # the adapter's driver description (autotuning results are per driver)
    cpu: bool = False  # a software adapter (lavapipe): autotuning is off unless asked for

    @property
    def shader_f16(self) -> bool:
        """The adapter can run f16 arithmetic and storage."""
        return "shader-f16" in self.features

    @property
    def subgroups(self) -> bool:
        """Subgroup operations are available and the subgroup size is known."""
        return "subgroups" in self.features and bool(self.subgroup_size)

    @property
    def subgroup_matrix(self) -> bool:
        """Subgroup matrices (tensor cores) are available."""
        return "chromium-experimental-subgroup-matrix" in self.features and bool(self.subgroup_matrix_configs)

    def limit(self, name: str, default: int) -> int:
        """One device limit with the WebGPU default when unknown."""
        return int(self.limits.get(name, default))

    @property
    def key(self) -> str:
        """A stable identity for autotuning caches (vendor, architecture, features, subgroup size)."""
        return "|".join([self.vendor, self.architecture, ",".join(sorted(self.features)),
                         str(self.subgroup_size or 0)])

    @staticmethod
    def portable() -> DeviceCaps:
        """WebGPU's core defaults: what any implementation offers (`--target webgpu-core`)."""
        return DeviceCaps(limits={"max-compute-invocations-per-workgroup": 256,
                                  "max-compute-workgroup-storage-size": 16384,
                                  "max-storage-buffers-per-shader-stage": 8,
                                  "max-compute-workgroups-per-dimension": 65535,
                                  "max-storage-buffer-binding-size": 128 << 20})

    @staticmethod
    def from_runtime(rt: Any) -> DeviceCaps:
        """The caps of an open runtime."""
        info = rt.info
        lo, hi = info.limits.get("subgroup-min-size"), info.limits.get("subgroup-max-size")
        configs = tuple(getattr(info, "subgroup_matrix_configs", ()) or ())
        return DeviceCaps(features=frozenset(info.features), limits=dict(info.limits),
                          subgroup_size=int(lo) if lo and lo == hi else None, vendor=info.vendor,
                          architecture=info.architecture, subgroup_matrix_configs=configs,
                          driver=str(getattr(info, "description", "")),
                          cpu=str(getattr(info, "adapter_type", "")).upper() == "CPU")


@dataclass(frozen=True)
class KernelLaunch:
    """One library dispatch.

    `bindings[i]` names what @binding(i) holds: PARAMS (a uniform of `params` as u32 words, each
    vec4-padded) or an operand role of the problem ("a", "b", "bias", "residual", "out", "x", ...).
    Operand offsets and strides are in `params` (in elements), so a binding is the whole buffer of its
    tensor; `read_only` lists the bindings the shader only reads.
    """

    name: str                              # variant name, e.g. "matmul.f32.tile64x64.r4x4"
    wgsl: str
    grid: tuple[int, int, int]
    workgroup_size: tuple[int, int, int]
    bindings: tuple[str, ...]
    params: tuple[int, ...] = ()
    read_only: frozenset[int] = frozenset()
    entry_point: str = "main"

    @property
    def params_binding(self) -> int | None:
        """The @binding of the params uniform, if any."""
        return self.bindings.index(PARAMS) if PARAMS in self.bindings else None

    def params_bytes(self) -> bytes:
        """`params` as little-endian u32 words padded to 16 bytes."""
        words = list(self.params) + [0] * (-len(self.params) % 4 or (4 if not self.params else 0))
        return struct.pack(f"<{len(words)}I", *words)


def f32_word(value: float) -> int:
    """The u32 bit pattern of an f32 (for float params)."""
    return struct.unpack("<I", struct.pack("<f", float(value)))[0]


def i32_word(value: int) -> int:
    """The u32 bit pattern of an i32 (for signed params)."""
    return int(value) & 0xFFFFFFFF


def record(launch: KernelLaunch, operands: Mapping[str, Any], rt: Any = None) -> None:
    """Record `launch` on the runtime with `operands[role]` (buffer id or BufferSlice) per binding."""
    from ..runtime import get_runtime

    rt = rt or get_runtime()
    binds: list[Any] = []
    for role in launch.bindings:
        binds.append(rt.constant(launch.params_bytes()) if role == PARAMS else operands[role])
    rt.dispatch(kernel_of(launch, rt), binds, launch.grid, launch.name)


@dataclass(frozen=True)
class LaunchPlan:
    """The dispatches of one variant, in order, and the scratch buffers (role -> bytes) they share."""

    steps: tuple[KernelLaunch, ...]
    scratch: Mapping[str, int] = field(default_factory=dict)


_KERNELS: dict[tuple[int, int], tuple[weakref.ref, Any]] = {}
_PLAN_CACHE: dict[tuple, Any] = {}
_PLAN_CACHE_SIZE = 512
_CAPS_KEYS: dict[int, tuple[DeviceCaps, tuple]] = {}


def kernel_of(launch: KernelLaunch, rt: Any) -> Any:
    """The runtime's compiled kernel of `launch` (memoised per launch object, which it does not keep alive:
    memoised plans hand out the same launches, so their WGSL is not hashed again on every eager call)."""
    key = (id(launch), id(rt))
    hit = _KERNELS.get(key)
    if hit is None or hit[0]() is not launch:
        if len(_KERNELS) > 4 * _PLAN_CACHE_SIZE:
            _KERNELS.clear()
        hit = _KERNELS[key] = (weakref.ref(launch), rt.kernel(launch.wgsl, launch.entry_point,
                                                               label=launch.name))
    return hit[1]


def _caps_key(caps: DeviceCaps) -> tuple:
    """A hashable identity of `caps` (features, subgroup size and every limit), memoised per object."""
    hit = _CAPS_KEYS.get(id(caps))
    if hit is None or hit[0] is not caps:
        if len(_CAPS_KEYS) > 64:
            _CAPS_KEYS.clear()
        hit = _CAPS_KEYS[id(caps)] = (caps, (caps.key, tuple(sorted(caps.limits.items()))))
    return hit[1]


def cached_plan(planner: Callable, p: Any, caps: DeviceCaps, variant: str | None) -> Any:
    """`planner(p, caps, variant)` memoised: eager ops plan the same problems again and again, and WGSL
    generation costs more host time than a small dispatch."""
    key = (planner.__name__, p, _caps_key(caps), variant)
    plan = _PLAN_CACHE.get(key)
    if plan is None:
        if len(_PLAN_CACHE) >= _PLAN_CACHE_SIZE:
            _PLAN_CACHE.clear()
        plan = _PLAN_CACHE[key] = planner(p, caps, variant)
    return plan


def ceil_div(a: int, b: int) -> int:
    """ceil(a / b) for positive b."""
    return -(-a // b)


def linear_grid(invocations: int, width: int = 64) -> tuple[int, int, int]:
    """Workgroups of `width` invocations for a 1-D launch: x up to 65535, the rest along y."""
    groups = ceil_div(invocations, width)
    if groups <= 65535:
        return (groups, 1, 1)
    return (65535, ceil_div(groups, 65535), 1)


def grid_within(count: int, limit: int) -> tuple[int, int]:
    """A 1-D workgroup count folded into (x, y) under the per-dimension limit (x * y >= count)."""
    if count <= limit:
        return count, 1
    y = ceil_div(count, limit)
    return ceil_div(count, y), y


__all__: Sequence[str] = ["PARAMS", "DeviceCaps", "KernelLaunch", "LaunchPlan", "f32_word", "i32_word",
                          "record", "kernel_of", "cached_plan", "ceil_div", "grid_within", "linear_grid"]
