"""The runtime queue's submissions and waits from C++ (`NativeQueue`), and the settings they follow:
TORCH_WEBGPU_SUBMIT, TORCH_WEBGPU_SYNC_SPIN_US and TORCH_WEBGPU_PLAN_SPLIT.

Below the Runtime (runtime.py opens one for its queue; commands.py's recorder submits through it), so it
knows the device and its queue, not the Runtime.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch_webgpu.config import PLAN_SPLIT, SUBMIT, SYNC_SPIN_US

from . import extension
from .extension import handle, raise_dawn_errors


def submit_choice() -> str:
    """TORCH_WEBGPU_SUBMIT: `native` (default: finish, submit and wait for the queue in one C++ call) or
    `python` (wgpudawn's Python objects: encoder.finish, queue.submit, on_submitted_work_done_sync)."""
    return SUBMIT.read()


def sync_spin_microseconds(software: bool = False) -> float:
    """TORCH_WEBGPU_SYNC_SPIN_US (default 20000; 0 on `software` adapters): how long a wait for the queue
    polls the work-done future before it blocks, as CUDA's default synchronize spins. A blocking wait lets
    the core sleep, and the wake-up costs more than short work takes: on the H200 a synchronised tiny eager
    op took 74 -> 43 us of wall time and a 1 KiB readback 130 -> 67 us with polling
    (`benchmarks/sync_cost.py`, 2026-12-02), and a compiled call whose GPU work outlasted a 1 ms spin paid
    0.1-0.3 ms for waking up (BERT-base 3.06 -> 2.80 ms per call with 20 ms:
    benchmarks/results/h200-2026-12-04-sync-spin.md). A software adapter (lavapipe) runs the work on the
    host's own cores, where polling would take one from it."""
    return SYNC_SPIN_US.read(software)


def plan_split_dispatches(software: bool = False) -> int:
    """TORCH_WEBGPU_PLAN_SPLIT (default 32; 0 on `software` adapters): a compiled call whose outputs stay
    on the device is submitted every this many dispatches, so the GPU runs the first ones while the host
    turns the rest into Vulkan commands (Dawn does that inside each submit: ~5 us per dispatch on the
    H200, all before the GPU starts when a call is one submit). A software adapter runs the commands on
    the host's own cores, so there is nothing to overlap with. `0`: one submit per call."""
    return PLAN_SPLIT.read(software)


class NativeQueue:
    """The runtime queue's encoders, submissions and waits from C++: `submit(encoder, wait)` finishes the
    encoder, submits it and (with `wait`) blocks in wgpuInstanceWaitAny with the GIL released, in one
    call; `new_encoder()` makes an encoder with no wgpudawn object (wrapped only when Python records).
    `raise_if_lost` (the runtime's) raises DeviceLostError where a failed wait means the device is gone."""

    def __init__(self, module: Any, device: Any, software: bool, raise_if_lost: Callable[[], None]):
        from wgpudawn.backends.dawn._api import GPUCommandEncoder
        from wgpudawn.backends.dawn._ffi import ffi
        from wgpudawn.backends.dawn._helpers import get_wgpu_instance

        self.device = device
        self._raise_if_lost = raise_if_lost
        self._submit = module.queue_submit
        self._read = module.buffer_read
        self._new = module.encoder_new
        self.release_encoder = module.encoder_release
        self._device = handle(device)
        self._queue = handle(device.queue)
        self._instance = int(ffi.cast("uintptr_t", get_wgpu_instance()))
        self._pending = extension.error_handler.pending   # filled by Dawn's uncaptured-error callback
        self._wrapper, self._ffi = GPUCommandEncoder, ffi
        self.handle = handle
        self.waits = 0
        self.encoders = 0   # made in C++
        module.set_spin(int(sync_spin_microseconds(software) * 1000))
        if hasattr(module, "set_plan_split"):   # an extension built before it submits each run at once
            module.set_plan_split(plan_split_dispatches(software))

    def new_encoder(self) -> int:
        """A new command encoder's handle, owned by the caller (`submit(..., release=True)` or
        `release_encoder`)."""
        self.encoders += 1
        return self._new(self._device)

    def wrap_encoder(self, encoder: int) -> Any:
        """The wgpudawn object of a `new_encoder` encoder; it takes over the reference (releases it)."""
        return self._wrapper("torch-webgpu", self._ffi.cast("WGPUCommandEncoder", encoder), self.device)

    def read(self, encoder: int, release: bool, src: Any, offset: int, staging: Any, size: int) -> bytes:
        """Copy `size` bytes of GPU buffer `src` at `offset` into the MAP_READ buffer `staging` at the
        end of `encoder`, finish and submit it, map `staging` and wait: its bytes, in one C++ call."""
        data = self._read(self._queue, encoder, release, handle(src), offset, handle(staging), size,
                          self._instance, self._pending)
        self.waits += 1
        if type(data) is bytes and not self._pending:
            return data
        if data == -1 or self._pending:
            raise_dawn_errors("command submission failed" + (" (the encoder was not submitted)"
                                                              if data == -1 else ""))
        self._raise_if_lost()
        from .errors import ValidationError

        raise ValidationError(f"mapping the readback buffer failed (WGPUMapAsyncStatus {data})")

    def submit(self, encoder: int, wait: bool, release: bool = False) -> None:
        """Finish and submit the encoder `encoder` (0: nothing to submit; `release`: drop the reference
        `new_encoder` gave); with `wait`, then wait until the queue has done all submitted work. Dawn's
        errors raise ValidationError, a lost device DeviceLostError."""
        status = self._submit(self._queue, encoder, self._instance if wait else 0, self._pending, release)
        if wait:
            self.waits += 1
        if status < 0:
            raise_dawn_errors("command submission failed (the encoder was not submitted)")
        if self._pending:
            raise_dawn_errors("command submission failed")
        if status > 1:   # WGPUQueueWorkDoneStatus other than Success: the device is gone, or Dawn failed
            self._raise_if_lost()
            from .errors import WebGPUError

            raise WebGPUError(f"waiting for the WebGPU queue failed (work-done status {status}); the device "
                              "may be lost: restart the process")


def native_queue(backend: str, device: Any, software: bool,
                 raise_if_lost: Callable[[], None]) -> NativeQueue | None:
    """The C++ submit-and-wait for a runtime's queue (its `backend`, `device`, whether its adapter is
    `software`, its `raise_if_lost`), or None where it is off (TORCH_WEBGPU_SUBMIT=python) or unavailable
    (no extension, the wgpu-native backend): then wgpudawn's Python objects submit and wait."""
    if submit_choice() == "python":
        return None
    module = extension.load(backend)
    return None if module is None else NativeQueue(module, device, software, raise_if_lost)
