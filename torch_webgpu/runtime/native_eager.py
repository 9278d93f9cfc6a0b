"""Native eager launches: a replayed launch plan's dispatches are recorded from C++ in one call.

ops/launch_cache.py replays a plan (the dispatches of an eager call, with buffers named by slot: the
call's argument buffers, then its new outputs). With the native path each plan holds an `EagerProgram`
(a runtime/native.py program over those slots): a replay resolves the slots' buffer ids to Dawn handles
and records every dispatch into the runtime's open encoder with one C++ call, which keeps each dispatch's
bind groups for its last few sets of slot buffers (a loop's outputs come back from the allocator in a
short rotation of same-sized buffers, and making a bind group costs more than the rest of the replay).
Work stays batched in the open command buffer until a sync point, as on the Python path.

With the default `native`, ops/launch_cache.py also takes a call's plan key and allocates a replay's
outputs in C++ (csrc/launch_plans.cpp, `torch_webgpu._C`). `TORCH_WEBGPU_EAGER_LAUNCH=python` (read when
torch_webgpu is imported) keeps all of it in Python (keys, torch.empty_strided, runtime.dispatch per
dispatch): the reference. The native path falls back to runtime.dispatch where the native recorder is
unavailable, while a dispatch profiler is open and inside `python_launches()` (which every
runtime/capture.py launch recording opens, and which graph capture or any other hook that must see each
dispatch go through `runtime.dispatch` should open too).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from torch_webgpu.config import EAGER_LAUNCH

from . import extension, native
from .runtime import Constant, Kernel, Runtime

_blockers_lock = threading.Lock()
_handles = extension.HANDLES   # GPU buffer serial -> WGPUBuffer handle
STATS = {"programs": 0, "records": 0}   # process-wide: EagerPrograms built, native replays recorded


def eager_launch_choice() -> str:
    """TORCH_WEBGPU_EAGER_LAUNCH: `native` (default) or `python` (every dispatch via runtime.dispatch)."""
    return EAGER_LAUNCH.read()


def native_eager_enabled(rt: Runtime) -> bool:
    """True when replayed launch plans on `rt` are recorded natively (checked once per plan)."""
    return eager_launch_choice() == "native" and extension.load(rt.backend) is not None


# Open `python_launches()` blocks over all threads: while any is open, every replay takes the Python
# path (one global count keeps the replay's check to one read; other threads merely lose the fast path).
BLOCKERS = [0]


@contextlib.contextmanager
def python_launches() -> Iterator[None]:
    """Inside, replays take the Python path (for hooks such as dispatch recordings that must see every
    dispatch go through runtime.dispatch)."""
    with _blockers_lock:
        BLOCKERS[0] += 1
    try:
        yield
    finally:
        with _blockers_lock:
            BLOCKERS[0] -= 1


def python_forced() -> bool:
    """True while a `python_launches()` block is open (on any thread)."""
    return BLOCKERS[0] > 0


def records_natively(rt: Runtime) -> bool:
    """True when a replay may record its dispatches from C++: no `python_launches()` block, graph capture
    or dispatch profiler must see each one go through runtime.dispatch."""
    return not BLOCKERS[0] and rt.capture is None and rt.profiler is None


def may_recycle(rt: Runtime) -> bool:
    """True when new outputs may be ids of freed storages of the same size that C++ hands back without the
    pool: not while a launch-plan recording or a graph capture tells buffers apart by id, nor while a
    graph pins buffers (the pool must see their releases)."""
    return not BLOCKERS[0] and rt.capture is None and not rt.pool.pinned


# A replay binding at least this many bytes is submitted as soon as it is recorded: the GPU starts on it
# (tens of microseconds or more of work) while the host returns and records what follows, instead of
# waiting for the next sync point or for the batch to fill. Smaller replays stay batched (a submit costs
# the host about as much as a small kernel costs the GPU, and on the H200 each submit boundary also
# costs GPU time). A replay of fewer than HEAVY_MIN_WORKGROUPS workgroups is never heavy: it binds a big
# buffer to read a little of it (`0 * b[0]` binds all of b), and submitting it alone added a boundary.
HEAVY_BYTES = 64 << 20
HEAVY_MIN_WORKGROUPS = 64


class EagerProgram:
    """A launch plan's dispatches over its buffer slots, recorded from C++ per replay."""

    def __init__(self, rt: Runtime, dispatches: Sequence[tuple[Kernel, Sequence[Any], tuple[int, ...]]]):
        """`dispatches`: (kernel, bindings, workgroups) with bindings (slot, offset, nbytes) or Constant."""
        used: list[int] = []   # plan slots bound by some dispatch, in native slot order
        builder = native.ProgramBuilder(rt)
        bound = workgroups = 0
        for kernel, bindings, counts in dispatches:
            workgroups += counts[0] * counts[1] * counts[2]
            operands: list[Any] = []
            for b in bindings:
                if isinstance(b, Constant):
                    operands.append(b)
                    continue
                slot, offset, nbytes = b
                bound += nbytes
                if slot not in used:
                    used.append(slot)
                operands.append(native.Slot(used.index(slot), offset, nbytes))
            builder.dispatch(kernel, operands, counts)
        self.rt = rt
        self.used = tuple(used)
        self.heavy = bound >= HEAVY_BYTES and workgroups >= HEAVY_MIN_WORKGROUPS   # submitted at once
        program = builder.build()
        self.program = program   # holds the kernels and constants its handles point to
        self.commands = program.commands
        self._capsule = program._capsule
        self._record = extension.module.eager_record
        self._live = rt.pool.live_by_id
        rt.recorder.end_native_pass = extension.module.eager_end_pass
        STATS["programs"] += 1

    def record(self, ids: Sequence[int]) -> None:
        """Record the dispatches on the buffers `ids` (plan slot -> buffer id) into the open encoder."""
        live, handles = self._live, _handles
        slots: list[int] = []
        for s in self.used:
            buf = live[ids[s]]
            h = handles.get(buf.serial)
            if h is None:
                h = extension.buffer_handle(buf)
            slots += (h, 0)
        rt = self.rt
        recorder = rt.recorder
        n = self.commands
        with rt.lock:
            # the eager pass is open on the recorder's encoder unless something else was recorded since
            encoder = recorder._handle if recorder.native_pass_open else recorder.native_pass_encoder()
            self._record(self._capsule, encoder, tuple(slots))
            recorder.commands += n
            recorder.pending_commands += n
            rt.dispatches += n
            STATS["records"] += 1
            if extension.error_handler.pending:
                extension.raise_dawn_errors("recording a native eager launch")
            if recorder.over_threshold or self.heavy:
                rt._submit_locked()
