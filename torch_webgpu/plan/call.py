"""`CallState`: what one run of a plan's nodes reads and writes, whichever `Executor` runs it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from torch_webgpu.runtime import BufferSlice

from .buffers import PlanBuffers
from .int64 import Int64Narrowing
from .layout import Layout
from .pipelines import PreparedDispatch


class CallState:
    """The buffers bound by plan name (name -> (buffer id, base offset)) and the prepared dispatches of
    one run of nodes (the init nodes at load, or a call's per-call nodes), and for a call: its layout,
    where device outputs go (`to_device`: the inputs' torch device, or None; `resident`: the outputs kept
    as DeviceArrays), the int64 inputs left to narrow (`narrowed`: (input, buffer id, offset, count)),
    and `results`, per plan output: ("input", k), ("host", readback offset) or ("device", its value)."""

    __slots__ = ("rt", "plan_buffers", "constants", "narrowing", "buffers", "dispatches", "layout",
                 "to_device", "resident", "narrowed", "results")

    def __init__(self, plan_buffers: PlanBuffers, constants: dict[str, Any], narrowing: Int64Narrowing,
                 buffers: dict[str, tuple[int, int]], dispatches: dict[int, PreparedDispatch],
                 layout: Layout | None = None, to_device: Any = None, resident: frozenset[int] = frozenset(),
                 narrowed: list[tuple[int, int, int, int]] | None = None):
        self.rt = plan_buffers.rt
        self.plan_buffers = plan_buffers
        self.constants = constants
        self.narrowing = narrowing
        self.buffers = buffers
        self.dispatches = dispatches
        self.layout = layout
        self.to_device = to_device
        self.resident = resident
        self.narrowed = narrowed if narrowed is not None else []
        self.results: dict[int, tuple[str, Any]] = {}

    def slice(self, name: str, offset: int, size: int) -> BufferSlice:
        """A range of plan buffer `name`."""
        buf_id, base = self.buffers[name]
        return BufferSlice(buf_id, base + offset, size)

    @property
    def narrowed_inputs(self) -> tuple[int, ...]:
        """The graph inputs left to narrow from int64."""
        return tuple(n[0] for n in self.narrowed)

    def again(self) -> CallState:
        """The same call bound the same way, with no results yet and nothing left to narrow (the
        reference run of check mode)."""
        return CallState(self.plan_buffers, self.constants, self.narrowing, self.buffers, self.dispatches,
                         self.layout, self.to_device, self.resident)


class Executor(Protocol):
    """What runs a call of the graph: the Python executor (python_executor.py), a layout's native program
    (native_executor.py), or check mode's wrapper of one (check.py)."""

    def run(self, state: CallState, args: Sequence[Any], as_numpy: bool) -> list[Any]:
        """Record the call bound in `state` and return its plan outputs (numpy arrays for host-bound
        ones when `as_numpy`, else torch tensors)."""
