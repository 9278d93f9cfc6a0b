"""Command capture: every dispatch, copy and clear the runtime records, kept as a replayable program.

While a `CommandCapture` is open on a runtime (`rt.capture`), the runtime's recording entry points
(`dispatch`, `copy`, `fill`, native programs) note each command with its buffers resolved to GPU buffers,
and the ones a replay cannot reproduce refuse with GraphCaptureError: uploads of host data, readbacks
and waits for the queue (downloads, synchronize, profiling). The work still runs as usual during capture.
Every GPU buffer a captured command touches is pinned in the pool, so a tensor freed after (or during)
capture never hands its memory to another: replays write only the graph's own buffers. Completeness is
checked, not assumed: the recorder's command count must grow exactly by what the hooks noted.

`CapturedCommands.replay()` records the whole capture and submits it: with the native executor
(runtime/native.py) as prepared programs with pre-made bind groups — one C call for an eager capture —
or, without it (and inside `rt.profile()`, so each dispatch is timed), from Python with pre-made bind
groups through `Runtime.record_bound`.

Launch recordings are the lighter kind, for eager launch plans (ops/launch_cache.py): while `recording()`
blocks are open on a thread, `Runtime.dispatch` notes each dispatch it records on that thread in every one
of them (kernel, bindings, workgroups, label, with the byte ranges and buffer sizes it bound), and
`unreplayable()` marks them as holding work a replay would miss (uploads, fills); `unrecorded()` hides
them (autotune's timing runs). Nothing else runs per dispatch while none is open.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from . import native_eager
from .errors import GraphCaptureError
from .extension import handle
from .native import NativeProgram, ProgramBuilder, native_available
from .runtime import LAUNCH_RECORDINGS, Binding, Constant, Runtime
from .runtime import unreplayable as unreplayable  # the launch recordings' API, kept beside them

_DISPATCH, _COPY, _CLEAR, _PROGRAM = "dispatch", "copy", "clear", "program"

# What each refused request is, and what to do instead.
_REMEDIES = {
    "upload": ("uploads new host data (a CPU tensor copied to the device, or an op that writes host "
               "values into a buffer)", "create and fill the input tensors before capture and copy new "
               "values into them with x.copy_(new) between replays"),
    "download": ("reads device data back to the host (.cpu(), .item(), .tolist(), printing, a CPU fallback "
                 "op, or an op with a data-dependent output shape such as nonzero, masked_select or "
                 "unique)", "keep host reads out of the captured region: read the graph's static outputs "
                 "after g.replay()"),
    "synchronize": ("waits for the GPU (torch.webgpu.synchronize(), empty_cache(), profiling)",
                    "synchronize before capture or after g.replay()"),
}


def refusal(what: str, detail: str = "") -> GraphCaptureError:
    """The error for a request of kind `what` ("upload", "download", "synchronize") during capture."""
    cause, remedy = _REMEDIES[what]
    extra = f" ({detail})" if detail else ""
    return GraphCaptureError(f"torch.webgpu.graph capture cannot record work that {cause}{extra}: a replay "
                             f"would not repeat it; {remedy}")


class CommandCapture:
    """Notes the commands recorded on `rt` between `start()` and `stop()`."""

    def __init__(self, rt: Runtime):
        self.rt = rt
        self.commands: list[tuple] = []
        self.serials: list[int] = []   # pinned GPU buffers, one entry per pin
        self._pinned: set[int] = set()
        self._expected = 0
        self._start_commands = 0
        self.failed: GraphCaptureError | None = None

    # ---- lifetime ------------------------------------------------------------------------------
    def start(self) -> None:
        """Submit what is pending (so the capture starts on an empty encoder) and open the capture."""
        rt = self.rt
        with rt.lock:
            if rt.capture is not None:
                raise GraphCaptureError("a torch.webgpu.graph capture is already open on this device; "
                                        "end it before starting another (captures do not nest)")
            rt.flush()
            self._start_commands = rt.recorder.commands
            rt.capture = self

    def stop(self) -> CapturedCommands:
        """Close the capture; raise if it was refused or if work was recorded past the hooks."""
        rt = self.rt
        with rt.lock:
            if rt.capture is self:
                rt.capture = None
            rt.flush()
            recorded = rt.recorder.commands - self._start_commands
            try:
                if self.failed is not None:
                    raise GraphCaptureError(f"the capture was refused earlier: {self.failed}")
                if recorded != self._expected:
                    raise GraphCaptureError(
                        f"{recorded - self._expected} of the {recorded} commands recorded during capture "
                        f"bypassed the runtime's capture hooks (a recording path that does not call "
                        f"rt.capture); the graph would be incomplete — record through Runtime.dispatch/"
                        f"copy/fill or NativeProgram.record")
                return CapturedCommands(rt, self.commands, self.serials)
            except GraphCaptureError:
                self.release()
                raise

    def release(self) -> None:
        """Unpin every buffer this capture pinned (its commands will never replay)."""
        pool = self.rt.pool
        with self.rt.lock:
            for serial in self.serials:
                pool.unpin(serial)
            self.serials.clear()
            self._pinned.clear()

    def refuse(self, what: str, detail: str = "") -> None:
        """Raise (and remember) the refusal of a request of kind `what`."""
        error = refusal(what, detail)
        if self.failed is None:
            self.failed = error
        raise error

    # ---- hooks (the runtime calls these under its lock, after recording the command) -----------------
    def _pin(self, serial: int) -> None:
        if serial > 0 and serial not in self._pinned:   # constants (negative serials) are not pooled
            self._pinned.add(serial)
            self.rt.pool.pin(serial)
            self.serials.append(serial)

    def dispatch(self, kernel: Any, bindings: Sequence[Binding], counts: tuple[int, int, int],
                 label: str) -> None:
        """Note a dispatch recorded by Runtime.dispatch."""
        resources = tuple([self.rt._resource(b, kernel) for b in bindings])
        for r in resources:
            self._pin(r[1])
        keep = tuple(b for b in bindings if isinstance(b, Constant))
        self.commands.append((_DISPATCH, kernel, resources, counts, keep, label))
        self._expected += 1

    def copy(self, src: Any, src_offset: int, dst: Any, dst_offset: int, nbytes: int) -> None:
        """Note a buffer-to-buffer copy (src/dst: DeviceBuffers)."""
        self._pin(src.serial)
        self._pin(dst.serial)
        self.commands.append((_COPY, src.gpu, src_offset, dst.gpu, dst_offset, nbytes))
        self._expected += 1

    def clear(self, dst: Any, offset: int, nbytes: int) -> None:
        """Note a clear_buffer of a DeviceBuffer's range."""
        self._pin(dst.serial)
        self.commands.append((_CLEAR, dst.gpu, offset, nbytes))
        self._expected += 1

    def program(self, program: NativeProgram, slots: tuple[int, ...], recorded: int) -> None:
        """Note a native program recorded into the encoder with `slots` ((handle, offset) pairs); it
        added `recorded` to the recorder's command count."""
        handles = set(slots[0::2])
        if handles:
            by_handle = {handle(b.gpu): b.serial for b in self.rt.pool.live()}
            missing = handles - by_handle.keys()
            if missing:
                raise GraphCaptureError(f"a native program recorded during capture binds {len(missing)} "
                                        f"buffer(s) the pool does not own; they cannot be kept alive for "
                                        f"the graph")
            for h in handles:
                self._pin(by_handle[h])
        self.commands.append((_PROGRAM, program, tuple(slots)))
        self._expected += recorded


class CapturedCommands:
    """A closed capture: its commands, ready to replay on the same buffers."""

    def __init__(self, rt: Runtime, commands: list[tuple], serials: list[int]):
        self.rt = rt
        self.commands = commands
        self.dispatches = sum(1 for c in commands if c[0] == _DISPATCH) + sum(
            c[1].dispatches for c in commands if c[0] == _PROGRAM)
        self._serials = serials
        self.native = native_available(rt)
        self._native = self._native_segments() if self.native else None
        self._python: list[tuple] | None = None if self.native else self._python_segments()

    def _native_segments(self) -> list[tuple[NativeProgram, tuple]]:
        """Runs of primitive commands as one native program each, between captured native programs."""
        segments: list[tuple[NativeProgram, tuple]] = []
        builder = ProgramBuilder(self.rt)
        for command in self.commands:
            kind = command[0]
            if kind == _DISPATCH:
                _, kernel, resources, counts, keep, _label = command
                builder.dispatch_resolved(kernel, resources, counts)
                builder.keep.extend(keep)
            elif kind == _COPY:
                builder.copy_resolved(*command[1:])
            elif kind == _CLEAR:
                builder.clear_resolved(*command[1:])
            else:
                if builder.commands:
                    segments.append((builder.build(), ()))
                    builder = ProgramBuilder(self.rt)
                segments.append((command[1], command[2]))
        if builder.commands:
            segments.append((builder.build(), ()))
        return segments

    def _python_segments(self) -> list[tuple]:
        """The commands with their bind groups made now (what replay records from Python)."""
        segments: list[tuple] = []
        executables = self.rt.executables
        for command in self.commands:
            if command[0] == _DISPATCH:
                _, kernel, resources, counts, keep, label = command
                with self.rt.lock:
                    bind_group = executables.bind_group(kernel, 0, resources)
                segments.append((_DISPATCH, kernel.pipeline, bind_group, counts, label, keep, resources))
            elif command[0] == _PROGRAM:
                raise GraphCaptureError("this graph holds a native program (a compiled call), which only "
                                        "replays natively: leave profiling off while replaying it")
            else:
                segments.append(command)
        return segments

    def replay(self) -> None:
        """Record every captured command on the captured buffers and submit (does not wait)."""
        rt = self.rt
        with rt.lock:
            if rt.capture is not None:
                raise GraphCaptureError("replaying a graph while a capture is open is not supported; "
                                        "end the capture first")
            if self._native is not None and not rt.profiling:
                segments = self._native
                if len(segments) == 1 and not rt.recorder.has_pending:
                    segments[0][0].record(segments[0][1], submit=True)   # one C call: encode + submit
                    return
                for program, slots in segments:
                    program.record(slots)
                rt.flush()
                return
            if self._python is None:   # profiling a native graph: per-dispatch timestamps need Python
                self._python = self._python_segments()
            recorder = rt.recorder
            for command in self._python:
                kind = command[0]
                if kind == _DISPATCH:
                    rt.record_bound(command[1], command[2], command[3], command[4])
                elif kind == _COPY:
                    recorder.encoder().copy_buffer_to_buffer(*command[1:])
                else:
                    recorder.encoder().clear_buffer(*command[1:])
            rt.flush()

    def release(self) -> None:
        """Drop the prepared programs and unpin the captured buffers (the graph cannot replay after)."""
        rt = self.rt
        with rt.lock:
            for serial in self._serials:
                rt.pool.unpin(serial)
            self._serials = []
            self._native, self._python = None, []
            self.commands = []
            self.dispatches = 0


# ---- launch recordings (eager launch plans) ----------------------------------------------------------

class Capture(list):
    """The (kernel, bindings, workgroups, label) entries of a launch recording, with per entry the (offset,
    nbytes) each buffer binding bound (None for constants) and the bytes of every buffer bound, as they
    were when the dispatch was recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.ranges: list[tuple] = []
        self.sizes: dict[int, int] = {}


@contextlib.contextmanager
def recording() -> Iterator[Capture]:
    """Collect (kernel, bindings, workgroups, label) of every dispatch `Runtime.dispatch` records on this
    thread inside (a None entry: something a replay would miss happened)."""
    captures = LAUNCH_RECORDINGS.open
    capture = Capture()
    captures.append(capture)
    try:
        with native_eager.python_launches():  # replays inside must come through Runtime.dispatch
            yield capture
    finally:
        # by identity: two captures holding the same entries compare equal
        del captures[next(i for i, c in enumerate(captures) if c is capture)]


@contextlib.contextmanager
def unrecorded() -> Iterator[None]:
    """Inside, the launch recordings open on this thread note nothing (autotune's timing runs are no part
    of the call being recorded); the runtime's dispatch count still grows, so a launch plan is not built."""
    saved = LAUNCH_RECORDINGS.open
    LAUNCH_RECORDINGS.open = []
    try:
        yield
    finally:
        LAUNCH_RECORDINGS.open = saved
