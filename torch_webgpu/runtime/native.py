"""Native command programs: dispatches, copies and clears prepared once and recorded from C++ per call.

`torch_webgpu._native_plan` (csrc/native_plan/, CPython only, no torch; loaded by extension.py) records a
`NativeProgram` into the runtime's open command encoder with no Python per command: pipelines, bind-group
layouts, fixed buffers and grids are given once; a call passes only its per-call buffers ("slots": the
graph inputs bound zero-copy and the output tensors). It drives the runtime's own Dawn device through
wgpudawn's C handles, so eager tensors, compiled plans and bundles share buffers and one queue. Bind groups
over fixed buffers are made once; those over slots are remade only when a slot's buffer changes.

Available with the Dawn backend (wgpudawn) when the extension is built; `TORCH_WEBGPU_EXECUTOR=python`
turns it off (the Python executors stay the reference).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torch_webgpu.config import EXECUTOR

from . import extension
from .extension import buffer_handle, handle, raise_dawn_errors
from .runtime import BufferSlice, Constant, Runtime

_DISPATCH, _COPY, _CLEAR = 0, 1, 2


def executor_choice() -> str:
    """TORCH_WEBGPU_EXECUTOR: `native` (default), `python`, or `check` (native, and the first call of
    each native program is compared with the Python executor's)."""
    return EXECUTOR.read()


def native_available(rt: Runtime) -> bool:
    """True when programs can be recorded natively on `rt` (and TORCH_WEBGPU_EXECUTOR allows it)."""
    return executor_choice() != "python" and extension.load(rt.backend) is not None


def unavailable_reason(rt: Runtime | None = None) -> str | None:
    """Why the native recorder cannot be used (on `rt`, if given; None when it can or was not tried)."""
    return extension.unavailable_reason(None if rt is None else rt.backend)


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
        module = extension.load(self.rt.backend)
        if module is None:
            raise RuntimeError(f"native executor unavailable: {unavailable_reason(self.rt)}")
        with self.rt.lock:
            capsule = module.program_new(handle(self.rt.device), tuple(self.commands))
            raise_dawn_errors("preparing a native program")
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
        self._pending = extension.error_handler.pending   # Dawn errors reported while native code ran

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
        if self._pending:
            raise_dawn_errors("recording a native program")
        if not submit:
            rt._maybe_submit()

    def info(self) -> dict:
        """Counts kept by the native side: commands, dispatches, slots, runs, bind groups created."""
        return self._info(self._capsule)


def buffer_slot(rt: Runtime, buffer_id: int, offset: int = 0) -> tuple[int, int]:
    """The (handle, offset) pair of a slot bound to a runtime buffer id."""
    return buffer_handle(rt.pool.get(buffer_id)), offset
