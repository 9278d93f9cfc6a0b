"""The one place op kernels record dispatches, so an op's launches can be captured and replayed.

`dispatch` forwards to the runtime and, while `recording()` blocks are open on this thread, appends what
it recorded to each of them; `unreplayable()` marks them as holding work a replay would miss (uploads).
ops/launch_cache.py turns such a capture into a launch plan.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence

from ...runtime import BufferSlice, Constant, Kernel, get_runtime, native_eager
from ...runtime.runtime import Binding

_local = threading.local()


def dispatch(kernel: Kernel, bindings: Sequence[Binding], workgroups: Sequence[int],
             label: str | None = None) -> None:
    """Record one dispatch (rt.dispatch) and note it in every open capture of this thread."""
    rt = get_runtime()
    captures = getattr(_local, "captures", None)
    if not captures:
        rt.dispatch(kernel, bindings, workgroups, label)
        return
    before = rt.dispatches
    rt.dispatch(kernel, bindings, workgroups, label)
    if rt.dispatches != before:  # a dispatch of zero workgroups records nothing and needs no replay
        entry = (kernel, tuple(bindings), tuple(workgroups), label)
        # what each buffer binding bound, now: a temporary buffer is gone by the time a plan is built
        ranges = tuple(None if isinstance(b, Constant) else rt.binding_resource(b, kernel)[2:]
                       for b in bindings)
        sizes = {bid: rt.pool.get(bid).nbytes
                 for bid in (b if type(b) is int else b.buffer_id for b in bindings
                             if type(b) is int or isinstance(b, BufferSlice))}
        for capture in captures:
            capture.append(entry)
            capture.ranges.append(ranges)
            capture.sizes.update(sizes)


class Capture(list):
    """The (kernel, bindings, workgroups, label) entries of a recording, with per entry the (offset,
    nbytes) each buffer binding bound (None for constants) and the bytes of every buffer bound, as they
    were when the dispatch was recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.ranges: list[tuple] = []
        self.sizes: dict[int, int] = {}


def unreplayable() -> None:
    """Mark every open capture of this thread as not replayable (the caller does work besides dispatches)."""
    for capture in getattr(_local, "captures", None) or ():
        capture.append(None)


@contextlib.contextmanager
def recording() -> Iterator[Capture]:
    """Collect (kernel, bindings, workgroups, label) of every dispatch made through `dispatch` inside
    (a None entry: something a replay would miss happened)."""
    captures = getattr(_local, "captures", None)
    if captures is None:
        captures = _local.captures = []
    capture = Capture()
    captures.append(capture)
    try:
        with native_eager.python_launches():  # replays inside must come through `dispatch`
            yield capture
    finally:
        # by identity: two captures holding the same entries compare equal
        del captures[next(i for i, c in enumerate(captures) if c is capture)]
