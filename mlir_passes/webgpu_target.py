"""The WebGPU target description for IREE, built from a device's granted limits and features."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass

# WebGPU's portable minimum for minStorageBufferOffsetAlignment; plans compiled with it run everywhere.
PORTABLE_OFFSET_ALIGNMENT = 256


@dataclass(frozen=True)
class WebGPUTarget:
    """What the shaders IREE generates may assume about the device (no subgroups, no 64-bit types)."""

    max_threads: int = 256
    max_workgroup_sizes: tuple[int, int, int] = (256, 256, 64)
    workgroup_memory_bytes: int = 16384
    max_workgroup_count: int = 65535
    storage_buffers_per_stage: int = 8
    max_binding_bytes: int = 128 << 20
    offset_alignment: int = PORTABLE_OFFSET_ALIGNMENT
    shader_f16: bool = False

    @classmethod
    def from_limits(cls, limits: Mapping[str, int], features: frozenset[str] | set[str] = frozenset()
                    ) -> WebGPUTarget:
        """The target for a device with these WebGPU `limits` (spec names) and `features`."""
        d = cls()
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
        )

    @property
    def spirv_features(self) -> str:
        """IREE's vulkan feature string: SPIR-V 1.3 shaders; f16 needs all three 16-bit capabilities."""
        feats = "spirv:v1.3,cap:Shader"
        if self.shader_f16:
            feats += ",cap:Float16,cap:StorageBuffer16BitAccess,ext:SPV_KHR_16bit_storage"
        return feats

    def executable_target(self) -> str:
        """The `#hal.executable.target` attribute: arch "webgpu" with a `wgp` table of the real limits."""
        sizes = ", ".join(str(s) for s in self.max_workgroup_sizes)
        count = self.max_workgroup_count
        wgp = (f"compute = {'fp32|fp16' if self.shader_f16 else 'fp32'}, "
               f"storage = {'b32|b16' if self.shader_f16 else 'b32'}, subgroup = none, dot = none, mma = [], "
               # Subgroup size is unknown to WebGPU at compile time; with subgroup = none it is unused.
               f"subgroup_size_choices = [64], max_workgroup_sizes = [{sizes}], "
               f"max_thread_count_per_workgroup = {self.max_threads}, "
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
        return hashlib.sha256(repr(sorted(asdict(self).items())).encode()).hexdigest()[:16]
