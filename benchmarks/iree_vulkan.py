"""IREE's own Vulkan runtime on the same IREE output as the WebGPU path: the codegen-quality baseline.

`prepare` compiles each figure's module with the WebGPU target (same executables as our WGSL) into a
.vmfb; on the GPU machine `IREEVulkanFunction` runs it through iree.runtime's `vulkan` driver. The gap
between this and `webgpu-compiled` is WebGPU/runtime overhead; the gap between this and torch CUDA is
codegen.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# The host-program flags our plan extraction needs (no memoized command buffers) are left out: IREE's
# runtime runs its host program the way it normally would. The executables are the same.
_WEBGPU_ONLY_HOST_FLAGS = ("--iree-hal-memoization=false", "--iree-hal-indirect-command-buffers=false")


def compile_vmfb(iree_input: str, target: Any) -> bytes:
    """A Vulkan .vmfb of `iree_input` (torch dialect with the WebGPU target attached)."""
    from iree.compiler.tools import compile_str

    from mlir_passes.iree_driver import compile_flags

    flags = [f for f in compile_flags(target) if f not in _WEBGPU_ONLY_HOST_FLAGS]
    return compile_str(iree_input, extra_args=flags)


class IREEVulkanFunction:
    """`main` of a .vmfb on IREE's Vulkan driver; trailing `constants` (the weights) stay on the device."""

    def __init__(self, vmfb: Path, constants: list[Any], driver: str = "vulkan"):
        import iree.runtime as ireert

        self._rt = ireert
        # A device of its own, not iree.runtime's process-wide cached one: while an IREE Vulkan device lives
        # its driver's threads poll the queue (on lavapipe they spin in the kernel, most of a core each, for
        # the rest of the process), so the device goes with the function (or at `close`).
        self.config = ireert.Config(device=ireert.get_device(driver, cache=False))
        self.context = ireert.SystemContext(config=self.config)
        self.context.add_vm_module(ireert.VmModule.copy_buffer(self.context.instance, vmfb.read_bytes()))
        self.main = self.context.modules.module["main"]
        self.constants = [self._to_device(c) for c in constants]
        self._placed: dict[tuple[int, ...], list[Any]] = {}

    def _to_device(self, value: Any) -> Any:
        import numpy as np

        if hasattr(value, "detach"):
            value = value.detach().to("cpu").numpy()
        if value.dtype == np.int64:
            # With 64-bit ints demoted, `main` still checks for i64 buffers but its dispatches read 32-bit
            # elements: pass the int32 values packed at the front of an i64-typed buffer.
            packed = np.zeros_like(value)
            packed.reshape(-1).view(np.int32)[:value.size] = value.reshape(-1).astype(np.int32)
            value = packed
        return self._rt.asdevicearray(self.config.device, np.asarray(value, order="C"))

    def __call__(self, *args: Any) -> Any:
        """Run `main` (IREE's synchronous entry: it returns when the GPU is done); inputs are uploaded once
        per distinct set of argument objects, as device tensors would be."""
        key = tuple(id(a) for a in args)
        if key not in self._placed:
            self._placed = {key: [self._to_device(a) for a in args]}
        return self.main(*self._placed[key], *self.constants)

    def close(self) -> None:
        """Release the device buffers, the module and the device (its driver threads stop)."""
        self._placed, self.constants = {}, []
        self.main = self.context = self.config = None

    def to_numpy(self, result: Any) -> Any:
        """A device result as a numpy array, through a mappable staging buffer (Vulkan's device-local
        results cannot be mapped, and importing numpy memory needs page alignment)."""
        rt, device = self._rt, self.config.device
        view = result._buffer_view
        source = view.get_buffer()
        staging = device.allocator.allocate_buffer(
            memory_type=int(rt.MemoryType.HOST_LOCAL | rt.MemoryType.DEVICE_VISIBLE),
            allowed_usage=int(rt.BufferUsage.TRANSFER_TARGET | rt.BufferUsage.MAPPING_SCOPED),
            allocation_size=source.byte_length())
        sem = device.create_semaphore(0)
        device.queue_copy(source, staging, wait_semaphores=rt.HalFence.create_at(sem, 0),
                          signal_semaphores=rt.HalFence.create_at(sem, 1))
        rt.HalFence.create_at(sem, 1).wait()
        return staging.map().asarray(view.shape, result._get_raw_dtype()).copy()
