"""A plan resolved for one input-shape signature (`Layout`), and the few a dynamic plan keeps (`Layouts`).

Everything of a plan that depends on the input shapes is evaluated here once (host expressions of
dynamic plans, host_expr.py): the per-call nodes and outputs, buffers sized for them, the input buffers
of host and converted inputs, the prepared dispatches and the readback offsets. A static plan has one
layout, built at load; a dynamic plan (dynamic=True) one per signature seen, up to `Layouts.limit`.
"""

from __future__ import annotations

from typing import Any

from . import host_expr
from .buffers import PlanBuffers
from .device_array import free_all
from .dtypes import SCALAR, shape_nbytes
from .format import LowIRNode, LowIROp, Plan, TensorSpec
from .pipelines import Pipelines

ALIGN = 256   # readback offsets of one call's outputs; the binding alignment when the device names none


class Layout:
    """Resolved per-call nodes and outputs, buffers sized for them, dispatch bindings and uniforms, and the
    readback offsets of one input-shape signature; `native`: its native programs, built on first use."""

    def __init__(self, plan: Plan, shapes: list[tuple[int, ...]], pipelines: Pipelines, rt: Any):
        self.shapes = shapes
        self.main = [LowIRNode(n.op, host_expr.evaluate_all(n.args, shapes)) for n in plan.main]
        self.outputs = [TensorSpec([host_expr.evaluate(d, shapes) for d in o.shape], o.dtype, o.device_dtype)
                        for o in plan.outputs]
        self.owned: list[int] = []
        self.buffers: dict[str, tuple[int, int]] = {}   # plan buffers of a size that depends on shapes
        for name, size in plan.buffers.items():
            if not host_expr.is_static(size):
                self.buffers[name] = (self._allocate(rt, host_expr.evaluate(size, shapes)), 0)
        # Per graph input that is not bound in place: the buffer it is uploaded, copied or narrowed into.
        self.host_inputs: dict[str, tuple[int, int]] = {}
        for k, spec in enumerate(plan.inputs):
            if spec.device_dtype == SCALAR:
                continue
            nbytes = shape_nbytes(shapes[k], spec.device_dtype)
            self.host_inputs[f"in{k}"] = (self._allocate(rt, max(nbytes, 4)), 0)
        self.dispatches = {id(n): pipelines.prepare(n) for n in self.main if n.op is LowIROp.DISPATCH}
        # One readback buffer holds every host-bound output of a call (one submit per call).
        self.readback_offsets: dict[int, int] = {}
        total = 0
        for node in self.main:
            if node.op is LowIROp.OUTPUT and "buffer" in node.args:
                self.readback_offsets[node.args["index"]] = total
                total += -(-node.args["size"] // ALIGN) * ALIGN
        self.readback = self._allocate(rt, max(total, 4))
        # (device outputs?, inputs narrowed on the device) -> native program (None: the Python executor)
        self.native: dict[tuple, Any] = {}

    def _allocate(self, rt: Any, size: int) -> int:
        buf = rt.allocate(max(int(size), 4))
        self.owned.append(buf)
        return buf


class Layouts:
    """The layouts of a plan by input-shape signature; past `limit`, the oldest is dropped (its buffers
    freed). Their buffers count among the plan's own (`PlanBuffers.owned`) while they are kept."""

    limit = 8   # input-shape signatures a dynamic plan keeps buffers for

    def __init__(self, plan: Plan, pipelines: Pipelines, buffers: PlanBuffers,
                 constant_shapes: list[tuple[int, ...]]):
        self.plan = plan
        self.pipelines = pipelines
        self.buffers = buffers
        self.constant_shapes = constant_shapes   # the lifted constants' shapes (inputs after the user's)
        self.by_shapes: dict[tuple, Layout] = {}

    def get(self, user_shapes: list[tuple[int, ...]]) -> Layout:
        """The layout of one input-shape signature (built on first use, kept for the next calls)."""
        key = tuple(user_shapes)
        layout = self.by_shapes.get(key)
        if layout is None:
            if len(self.by_shapes) >= self.limit:
                old = self.by_shapes.pop(next(iter(self.by_shapes)))
                rt = self.buffers.rt
                rt.synchronize()   # its buffers may still be read by submitted work
                for buf in old.owned:
                    self.buffers.owned.remove(buf)
                free_all(rt, old.owned)
            layout = Layout(self.plan, [*user_shapes, *self.constant_shapes], self.pipelines, self.buffers.rt)
            self.buffers.owned.extend(layout.owned)
            self.by_shapes[key] = layout
        return layout

    def values(self) -> list[Layout]:
        """The layouts kept now, oldest first."""
        return list(self.by_shapes.values())
