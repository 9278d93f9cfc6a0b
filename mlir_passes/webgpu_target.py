"""The WebGPU target description for IREE, built from a device's granted limits and features."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

# WebGPU's portable minimum for minStorageBufferOffsetAlignment; plans compiled with it run everywhere.
PORTABLE_OFFSET_ALIGNMENT = 256


@dataclass(frozen=True)
class WebGPUTarget:
    """What the shaders IREE generates may assume about the device (no 64-bit types; subgroups only of
    one known size)."""

    max_threads: int = 256
    max_workgroup_sizes: tuple[int, int, int] = (256, 256, 64)
    workgroup_memory_bytes: int = 16384
    max_workgroup_count: int = 65535
    storage_buffers_per_stage: int = 8
    max_binding_bytes: int = 128 << 20
    offset_alignment: int = PORTABLE_OFFSET_ALIGNMENT
    shader_f16: bool = False
    # The device's one subgroup size, or None: IREE's warp reductions (parallel sum/softmax/layernorm rows)
    # split work by subgroup size, so subgroup ops are only enabled when every pipeline has the same one.
    subgroup_size: int | None = None
    # (component, result, M, N, K) of the device's subgroup matrices (tensor cores; Dawn's
    # chromium-experimental-subgroup-matrix): the kernel library's f16 matmuls use them. IREE does not.
    subgroup_matrix_configs: tuple[tuple[str, str, int, int, int], ...] = ()

    @classmethod
    def from_limits(cls, limits: Mapping[str, int], features: frozenset[str] | set[str] = frozenset(),
                    subgroup_matrix_configs: Sequence[Sequence[Any]] = ()) -> WebGPUTarget:
        """The target for a device with these WebGPU `limits` (spec names), `features` and subgroup-matrix
        configs (kept only with the feature, shader-f16 and a fixed subgroup size, as the library needs)."""
        d = cls()
        subgroup_size = _fixed_subgroup_size(limits, features)
        configs = tuple((str(c[0]), str(c[1]), int(c[2]), int(c[3]), int(c[4]))
                        for c in subgroup_matrix_configs)
        if not ({"chromium-experimental-subgroup-matrix", "shader-f16"} <= set(features) and subgroup_size):
            configs = ()
        return cls(
            max_threads=int(limits.get("max-compute-invocations-per-workgroup", d.max_threads)),
            max_workgroup_sizes=(
                int(limits.get("max-compute-workgroup-size-x", d.max_workgroup_sizes[0])),
                int(limits.get("max-compute-workgroup-size-y", d.max_workgroup_sizes[1])),
                int(limits.get("max-compute-workgroup-size-z", d.max_workgroup_sizes[2]))),
            workgroup_memory_bytes=int(limits.get("max-compute-workgroup-storage-size",
                                                  d.workgroup_memory_bytes)),
            max_workgroup_count=int(limits.get("max-compute-workgroups-per-dimension",
                                                d.max_workgroup_count)),
            storage_buffers_per_stage=int(limits.get("max-storage-buffers-per-shader-stage",
                                                     d.storage_buffers_per_stage)),
            max_binding_bytes=int(limits.get("max-storage-buffer-binding-size", d.max_binding_bytes)),
            offset_alignment=max(PORTABLE_OFFSET_ALIGNMENT,
                                 int(limits.get("min-storage-buffer-offset-alignment", 0))),
            shader_f16="shader-f16" in features,
            subgroup_size=subgroup_size,
            subgroup_matrix_configs=configs,
        )

    @property
    def spirv_features(self) -> str:
        """IREE's vulkan feature string: SPIR-V 1.3 shaders; f16 needs all three 16-bit capabilities."""
        feats = "spirv:v1.3,cap:Shader"
        if self.shader_f16:
            feats += ",cap:Float16,cap:StorageBuffer16BitAccess,ext:SPV_KHR_16bit_storage"
        if self.subgroup_size:
            # The SPIR-V subgroup ops the WGSL translator maps onto WGSL's subgroup builtins.
            feats += ",cap:GroupNonUniform,cap:GroupNonUniformShuffle,cap:GroupNonUniformArithmetic"
        return feats

    @property
    def thread_limit(self) -> int:
        """Threads per workgroup IREE may use. With subgroups, at most subgroup_size²: IREE's warp reduction
        reduces the per-subgroup partials with one more subgroup, and gives up (one thread per row) when
        the workgroup it would pick has more subgroups than that (a 1000-wide row on 8-wide subgroups)."""
        if self.subgroup_size:
            return min(self.max_threads, self.subgroup_size ** 2)
        return self.max_threads

    def executable_target(self) -> str:
        """The `#hal.executable.target` attribute: arch "webgpu" with a `wgp` table of the real limits."""
        sizes = ", ".join(str(s) for s in self.max_workgroup_sizes)
        count = self.max_workgroup_count
        # Without a known subgroup size the size choice is unused (subgroup = none: serial reductions).
        subgroup, choice = ("shuffle|arithmetic", self.subgroup_size) if self.subgroup_size else ("none", 64)
        wgp = (f"compute = {'fp32|fp16' if self.shader_f16 else 'fp32'}, "
               f"storage = {'b32|b16' if self.shader_f16 else 'b32'}, subgroup = {subgroup}, dot = none, "
               f"mma = [], subgroup_size_choices = [{choice}], max_workgroup_sizes = [{sizes}], "
               f"max_thread_count_per_workgroup = {self.thread_limit}, "
               f"max_workgroup_memory_bytes = {self.workgroup_memory_bytes}, "
               f"max_workgroup_counts = [{count}, {count}, {count}]")
        info = f'#iree_gpu.target<arch = "webgpu", features = "{self.spirv_features}", wgp = <{wgp}>>'
        config = f"{{iree_codegen.target_info = {info}}}"
        return f'#hal.executable.target<"vulkan-spirv", "vulkan-spirv-fb", {config}>'

    def device_targets_attribute(self) -> str:
        """The value of the module attribute `hal.device.targets`."""
        return f'[#hal.device.target<"vulkan", [{self.executable_target()}]>]'

    def iree_flags(self) -> list[str]:
        """Compiler flags that depend on the device (resource alignment and allocation size)."""
        return [
            f"--iree-stream-resource-min-offset-alignment={self.offset_alignment}",
            f"--iree-stream-resource-max-allocation-size={self.max_binding_bytes}",
        ]

    def key(self) -> str:
        """A stable hash of everything that changes generated code (for compile caches)."""
        fields = asdict(self)
        if fields["subgroup_size"] is None:
            del fields["subgroup_size"]  # keys of targets without subgroups stay what they were
        if not fields["subgroup_matrix_configs"]:
            del fields["subgroup_matrix_configs"]   # (and those without subgroup matrices)
        return hashlib.sha256(repr(sorted(fields.items())).encode()).hexdigest()[:16]


def _fixed_subgroup_size(limits: Mapping[str, int], features: frozenset[str] | set[str]) -> int | None:
    """The subgroup size when the device has the `subgroups` feature and reports one size, else None."""
    low, high = limits.get("subgroup-min-size"), limits.get("subgroup-max-size")
    if "subgroups" not in features or low is None or low != high or int(low) < 1:
        return None
    return int(low)
