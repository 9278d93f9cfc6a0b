"""Native command programs: dispatches, copies and clears prepared once and recorded from C++ per call.

`torch_webgpu._native_plan` (csrc/native_plan/, CPython only, no torch) records a `NativeProgram` into
the runtime's open command encoder with no Python per command: pipelines, bind-group layouts, fixed
buffers and grids are given once; a call passes only its per-call buffers ("slots": the graph inputs bound
zero-copy and the output tensors). It drives the runtime's own Dawn device through wgpudawn's C handles,
so eager tensors, compiled plans and bundles share buffers and one queue. Bind groups over fixed buffers
are made once; those over slots are remade only when a slot's buffer changes.

Available with the Dawn backend (wgpudawn) when the extension is built; `TORCH_WEBGPU_EXECUTOR=python`
turns it off (the Python executors stay the reference).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .commands import env_amount
from .runtime import BufferSlice, Constant, Runtime

# Dawn entry points, in the order of csrc/native_plan/dawn_procs.h DawnProcs.
PROCS = (
    "wgpuDeviceCreateBindGroup", "wgpuBindGroupRelease", "wgpuCommandEncoderBeginComputePass",
    "wgpuCommandEncoderCopyBufferToBuffer", "wgpuCommandEncoderClearBuffer",
    "wgpuComputePassEncoderSetPipeline", "wgpuComputePassEncoderSetBindGroup",
    "wgpuComputePassEncoderDispatchWorkgroups", "wgpuComputePassEncoderEnd", "wgpuComputePassEncoderRelease",
    "wgpuBufferAddRef", "wgpuBufferRelease", "wgpuComputePipelineAddRef", "wgpuComputePipelineRelease",
    "wgpuBindGroupLayoutAddRef", "wgpuBindGroupLayoutRelease", "wgpuDeviceAddRef", "wgpuDeviceRelease",
    "wgpuCommandEncoderFinish", "wgpuQueueSubmit", "wgpuCommandBufferRelease",
    "wgpuDeviceCreateCommandEncoder", "wgpuCommandEncoderRelease", "wgpuQueueOnSubmittedWorkDone",
    "wgpuInstanceWaitAny", "wgpuBufferMapAsync", "wgpuBufferGetConstMappedRange", "wgpuBufferUnmap",
)
_STRUCTS = ("WGPUBindGroupEntry", "WGPUBindGroupDescriptor", "WGPUComputePassDescriptor",
            "WGPUQueueWorkDoneCallbackInfo", "WGPUFutureWaitInfo", "WGPUFuture",
            "WGPUCommandEncoderDescriptor", "WGPUBufferMapCallbackInfo")
# webgpu.h enum values the C++ side compiles in (checked against wgpudawn's lib at load).
_ENUMS = ("WGPUCallbackMode_WaitAnyOnly", "WGPUQueueWorkDoneStatus_Success", "WGPUWaitStatus_Success",
          "WGPUWaitStatus_TimedOut", "WGPUMapAsyncStatus_Success", "WGPUMapMode_Read")
_DISPATCH, _COPY, _CLEAR = 0, 1, 2

_module: Any = None
_unavailable: str | None = None


def executor_choice() -> str:
    """TORCH_WEBGPU_EXECUTOR: `native` (default), `python`, or `check` (native, and the first call of
    each native program is compared with the Python executor's)."""
    name = os.environ.get("TORCH_WEBGPU_EXECUTOR", "native").strip().lower() or "native"
    if name not in ("native", "python", "check"):
        raise ValueError(f"TORCH_WEBGPU_EXECUTOR={name!r} is not 'native', 'python' or 'check'")
    return name


def _load(rt: Runtime) -> Any:
    """The initialised extension module, or None (with the reason in `_unavailable`)."""
    global _module, _unavailable, _error_handler
    if rt.backend != "dawn":
        # per runtime, not cached: one process may hold Dawn and wgpu-native runtimes side by side, and
        # Dawn's procs called on a wgpu-native handle would crash
        return None
    if _module is not None or _unavailable is not None:
        return _module
    try:
        from wgpudawn.backends.dawn._ffi import ffi, lib

        from torch_webgpu import _native_plan
    except ImportError as exc:
        _unavailable = f"extension not built ({exc}); run tools/build_extension_inplace.sh or pip install"
        logging.getLogger(__name__).warning("native plan executor unavailable: %s", _unavailable)
        return None
    try:
        addresses = tuple(int(ffi.cast("uintptr_t", ffi.addressof(lib, name))) for name in PROCS)
        _native_plan.set_procs(addresses, tuple(ffi.sizeof(s) for s in _STRUCTS),
                               tuple(int(getattr(lib, name)) for name in _ENUMS))
    except (AttributeError, RuntimeError, TypeError, ValueError) as exc:   # another wgpudawn/Dawn or build
        _unavailable = f"{exc}"
        logging.getLogger(__name__).warning("native plan executor unavailable, using Python's: %s", exc)
        return None
    from wgpudawn.backends.dawn._api import error_handler as _error_handler
    _module = _native_plan
    return _module


def native_available(rt: Runtime) -> bool:
    """True when programs can be recorded natively on `rt` (and TORCH_WEBGPU_EXECUTOR allows it)."""
    return executor_choice() != "python" and _load(rt) is not None


def unavailable_reason(rt: Runtime | None = None) -> str | None:
    """Why the native recorder cannot be used (on `rt`, if given; None when it can or was not tried)."""
    if rt is not None and rt.backend != "dawn":
        return f"backend {rt.backend!r} (the native executor drives Dawn through wgpudawn)"
    return _unavailable


def handle(obj: Any) -> int:
    """The C handle (WGPU* pointer) behind a wgpudawn object."""
    return int(_cast("uintptr_t", obj._internal))


HANDLES: dict[int, int] = {}   # GPU buffer serial -> WGPUBuffer handle (serials are never reused)
_MAX_HANDLES = 1 << 16


def buffer_handle(buf: Any) -> int:
    """The WGPUBuffer handle of a runtime DeviceBuffer, cached by its GPU buffer's serial (a cffi cast
    per binding per call adds up on the hot paths)."""
    h = HANDLES.get(buf.serial)
    if h is None:
        if len(HANDLES) >= _MAX_HANDLES:
            HANDLES.clear()
        h = HANDLES[buf.serial] = handle(buf.gpu)
    return h


def _cast(*args: Any) -> Any:
    global _cast
    from wgpudawn.backends.dawn._ffi import ffi

    _cast = ffi.cast
    return ffi.cast(*args)


@dataclass(frozen=True)
class Slot:
    """A per-call buffer operand: slot `index` (its base offset is added) plus `offset`."""

    index: int
    offset: int = 0
    nbytes: int = 0   # the bound range (bindings); copies give their size separately


Operand = BufferSlice | Constant | Slot


class ProgramBuilder:
    """Collects commands in Python objects (kernels, buffer ids, slots) and turns them into C handles."""

    def __init__(self, rt: Runtime):
        self.rt = rt
        self.commands: list[tuple] = []
        self.keep: list[Any] = []   # Python objects whose handles the program holds (constants, kernels)

    def _operand(self, op: Operand) -> tuple[int, int, int]:
        if isinstance(op, Slot):
            return 0, op.index, op.offset
        if isinstance(op, Constant):
            self.keep.append(op)
            return handle(op.gpu), -1, 0
        buf = self.rt.buffer(op.buffer_id)
        return handle(buf.gpu), -1, op.offset

    def dispatch(self, kernel: Any, bindings: Sequence[Operand], grid: Sequence[int]) -> None:
        """A dispatch of `kernel` with bindings 0..n-1 (BufferSlice, Constant or Slot) over `grid`."""
        counts = tuple(int(c) for c in grid) + (1,) * (3 - len(grid))
        if max(counts) > self.rt.max_workgroups:
            from .errors import LimitExceededError

            raise LimitExceededError(f"kernel '{kernel.label}': grid {counts} exceeds the device's "
                                     f"per-dimension limit ({self.rt.max_workgroups})")
        if min(counts) == 0:
            return
        entries = []
        for i, b in enumerate(bindings):
            if isinstance(b, Slot):
                entries.append((i, 0, b.index, b.offset, max(b.nbytes, 4) + -max(b.nbytes, 4) % 4))
                continue
            gpu, _serial, offset, size = self.rt.binding_resource(b, kernel)
            if isinstance(b, Constant):
                self.keep.append(b)
            entries.append((i, handle(gpu), -1, offset, size))
        self.keep.append(kernel)
        self.commands.append((_DISPATCH, handle(kernel.pipeline), handle(kernel.layout(0)), *counts,
                              tuple(entries)))

    def dispatch_resolved(self, kernel: Any, resources: Sequence[tuple],
                          counts: tuple[int, int, int]) -> None:
        """A dispatch whose bindings are already resolved to (gpu buffer, serial, offset, size) — a
        captured graph's, whose buffer ids may be gone while the GPU buffers stay pinned."""
        entries = tuple((i, handle(gpu), -1, offset, size)
                        for i, (gpu, _, offset, size) in enumerate(resources))
        self.keep.append(kernel)
        self.keep.extend(r[0] for r in resources)
        self.commands.append((_DISPATCH, handle(kernel.pipeline), handle(kernel.layout(0)), *counts, entries))

    def copy_resolved(self, src_gpu: Any, src_offset: int, dst_gpu: Any, dst_offset: int,
                      nbytes: int) -> None:
        """A copy between GPU buffers given directly (see dispatch_resolved)."""
        self.keep.extend((src_gpu, dst_gpu))
        self.commands.append((_COPY, handle(src_gpu), -1, src_offset, handle(dst_gpu), -1, dst_offset,
                              int(nbytes)))

    def clear_resolved(self, gpu: Any, offset: int, nbytes: int) -> None:
        """A clear of a GPU buffer's range given directly (see dispatch_resolved)."""
        self.keep.append(gpu)
        self.commands.append((_CLEAR, handle(gpu), -1, offset, int(nbytes)))

    def copy(self, src: Operand, dst: Operand, nbytes: int) -> None:
        """A buffer-to-buffer copy of `nbytes` (4-byte aligned)."""
        if nbytes:
            self.commands.append((_COPY, *self._operand(src), *self._operand(dst), int(nbytes)))

    def clear(self, dst: Operand, nbytes: int) -> None:
        """Zero `nbytes` at `dst`."""
        if nbytes:
            self.commands.append((_CLEAR, *self._operand(dst), int(nbytes)))

    @property
    def dispatch_count(self) -> int:
        """Dispatches collected so far."""
        return sum(1 for c in self.commands if c[0] == _DISPATCH)

    def build(self) -> NativeProgram:
        """The native program (fixed bind groups are created now; Dawn errors raise here)."""
        module = _load(self.rt)
        if module is None:
            raise RuntimeError(f"native executor unavailable: {unavailable_reason(self.rt)}")
        with self.rt.lock:
            capsule = module.program_new(handle(self.rt.device), tuple(self.commands))
            _raise_dawn_errors("preparing a native program")
        return NativeProgram(self.rt, module, capsule, self.dispatch_count, len(self.commands), self.keep)


class NativeProgram:
    """A prepared command program; `record(slots)` appends it to the runtime's open encoder."""

    def __init__(self, rt: Runtime, module: Any, capsule: Any, dispatches: int, commands: int,
                 keep: list[Any]):
        self.rt = rt
        self._run = module.program_run
        self._info = module.program_info
        self._capsule = capsule
        self.dispatches = dispatches
        self.commands = commands
        self._keep = keep
        self._queue: int | None = None

    def record(self, slots: tuple[int, ...], submit: bool = False) -> None:
        """Record the program; `slots` = (buffer handle, base offset) per slot, flattened. With `submit`,
        the encoder (with whatever was recorded before) is also finished and submitted from C++.
        Caller holds the runtime lock."""
        rt = self.rt
        recorder = rt.recorder
        rt.check_alive()
        if self._queue is None:
            self._queue = handle(rt.device.queue)
        capture = rt.capture
        if capture is not None and submit:
            submit = False   # the capture notes the program; submitting stays the recorder's
        before = recorder.commands
        if submit and not recorder.has_pending:
            encoder = 0   # nothing recorded before: C++ makes, submits and releases its own encoder
        else:
            encoder = recorder.encoder_handle()   # ends the recorder's open pass: program order is kept
        submits = self._run(self._capsule, encoder, slots, self._queue if submit else 0)
        recorder.commands += self.commands
        if capture is not None:
            capture.program(self, slots, recorder.commands - before)
        rt.dispatches += self.dispatches
        if submit:
            recorder.submitted_elsewhere()
            recorder.submits += (submits or 1) - 1   # a run split into pieces (plan_split_dispatches)
        else:
            recorder.pending_commands += self.commands
        if _error_handler.pending:
            _raise_dawn_errors("recording a native program")
        if not submit:
            rt._maybe_submit()

    def info(self) -> dict:
        """Counts kept by the native side: commands, dispatches, slots, runs, bind groups created."""
        return self._info(self._capsule)


def submit_choice() -> str:
    """TORCH_WEBGPU_SUBMIT: `native` (default: finish, submit and wait for the queue in one C++ call) or
    `python` (wgpudawn's Python objects: encoder.finish, queue.submit, on_submitted_work_done_sync)."""
    name = os.environ.get("TORCH_WEBGPU_SUBMIT", "native").strip().lower() or "native"
    if name not in ("native", "python"):
        raise ValueError(f"TORCH_WEBGPU_SUBMIT={name!r} is not 'native' or 'python'")
    return name


def sync_spin_microseconds(software: bool = False) -> float:
    """TORCH_WEBGPU_SYNC_SPIN_US (default 20000; 0 on `software` adapters): how long a wait for the queue
    polls the work-done future before it blocks, as CUDA's default synchronize spins. A blocking wait lets
    the core sleep, and the wake-up costs more than short work takes: on the H200 a synchronised tiny eager
    op took 74 -> 43 us of wall time and a 1 KiB readback 130 -> 67 us with polling
    (`benchmarks/sync_cost.py`, 2026-12-02), and a compiled call whose GPU work outlasted a 1 ms spin paid
    0.1-0.3 ms for waking up (BERT-base 3.06 -> 2.80 ms per call with 20 ms:
    benchmarks/results/h200-2026-12-04-sync-spin.md). A software adapter (lavapipe) runs the work on the
    host's own cores, where polling would take one from it."""
    default = "0" if software else "20000"
    return env_amount("TORCH_WEBGPU_SYNC_SPIN_US", default, "microseconds like 1000, or 0", off=("",)) or 0.0


def plan_split_dispatches(software: bool = False) -> int:
    """TORCH_WEBGPU_PLAN_SPLIT (default 32; 0 on `software` adapters): a compiled call whose outputs stay
    on the device is submitted every this many dispatches, so the GPU runs the first ones while the host
    turns the rest into Vulkan commands (Dawn does that inside each submit: ~5 us per dispatch on the
    H200, all before the GPU starts when a call is one submit). A software adapter runs the commands on
    the host's own cores, so there is nothing to overlap with. `0`: one submit per call."""
    value = env_amount("TORCH_WEBGPU_PLAN_SPLIT", "0" if software else "32",
                       "a number of dispatches like 32, or 0", off=("", "off"))
    if value is not None and value != int(value):
        raise ValueError(f"TORCH_WEBGPU_PLAN_SPLIT={value!r}: expected a whole number of dispatches")
    return int(value or 0)


class NativeQueue:
    """The runtime queue's encoders, submissions and waits from C++: `submit(encoder, wait)` finishes the
    encoder, submits it and (with `wait`) blocks in wgpuInstanceWaitAny with the GIL released, in one
    call; `new_encoder()` makes an encoder with no wgpudawn object (wrapped only when Python records)."""

    def __init__(self, rt: Runtime, module: Any):
        from wgpudawn.backends.dawn._api import GPUCommandEncoder
        from wgpudawn.backends.dawn._ffi import ffi
        from wgpudawn.backends.dawn._helpers import get_wgpu_instance

        self.rt = rt
        self._submit = module.queue_submit
        self._read = module.buffer_read
        self._new = module.encoder_new
        self.release_encoder = module.encoder_release
        self._device = handle(rt.device)
        self._queue = handle(rt.device.queue)
        self._instance = int(_cast("uintptr_t", get_wgpu_instance()))
        self._pending = _error_handler.pending   # filled by Dawn's uncaptured-error callback
        self._wrapper, self._ffi = GPUCommandEncoder, ffi
        self.handle = handle
        self.waits = 0
        self.encoders = 0   # made in C++
        module.set_spin(int(sync_spin_microseconds(rt.info.software) * 1000))
        if hasattr(module, "set_plan_split"):   # an extension built before it submits each run at once
            module.set_plan_split(plan_split_dispatches(rt.info.software))

    def new_encoder(self) -> int:
        """A new command encoder's handle, owned by the caller (`submit(..., release=True)` or
        `release_encoder`)."""
        self.encoders += 1
        return self._new(self._device)

    def wrap_encoder(self, encoder: int) -> Any:
        """The wgpudawn object of a `new_encoder` encoder; it takes over the reference (releases it)."""
        return self._wrapper("torch-webgpu", self._ffi.cast("WGPUCommandEncoder", encoder), self.rt.device)

    def read(self, encoder: int, release: bool, src: Any, offset: int, staging: Any, size: int) -> bytes:
        """Copy `size` bytes of GPU buffer `src` at `offset` into the MAP_READ buffer `staging` at the
        end of `encoder`, finish and submit it, map `staging` and wait: its bytes, in one C++ call."""
        data = self._read(self._queue, encoder, release, handle(src), offset, handle(staging), size,
                          self._instance, self._pending)
        self.waits += 1
        if type(data) is bytes and not self._pending:
            return data
        if data == -1 or self._pending:
            _raise_dawn_errors("command submission failed" + (" (the encoder was not submitted)"
                                                              if data == -1 else ""))
        self.rt.raise_if_lost()
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
            _raise_dawn_errors("command submission failed (the encoder was not submitted)")
        if self._pending:
            _raise_dawn_errors("command submission failed")
        if status > 1:   # WGPUQueueWorkDoneStatus other than Success: the device is gone, or Dawn failed
            self.rt.raise_if_lost()
            from .errors import WebGPUError

            raise WebGPUError(f"waiting for the WebGPU queue failed (work-done status {status}); the device "
                              "may be lost: restart the process")


def native_queue(rt: Runtime) -> NativeQueue | None:
    """The C++ submit-and-wait for `rt`'s queue, or None where it is off (TORCH_WEBGPU_SUBMIT=python) or
    unavailable (no extension, the wgpu-native backend): then wgpudawn's Python objects submit and wait."""
    if submit_choice() == "python":
        return None
    module = _load(rt)
    return None if module is None else NativeQueue(rt, module)


def buffer_slot(rt: Runtime, buffer_id: int, offset: int = 0) -> tuple[int, int]:
    """The (handle, offset) pair of a slot bound to a runtime buffer id."""
    return buffer_handle(rt.pool.get(buffer_id)), offset


class _NoErrors:
    pending: list = []


_error_handler: Any = _NoErrors()   # wgpudawn's ErrorHandler once the module is loaded


def _raise_dawn_errors(what: str) -> None:
    """Raise the Dawn validation errors reported while native code ran (as ValidationError)."""
    if not _error_handler.pending:
        return
    from .errors import ValidationError

    errors, _error_handler.pending[:] = list(_error_handler.pending), []
    raise ValidationError(f"{what}: " + "; ".join(message for _, message in errors))
