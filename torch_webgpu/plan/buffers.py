"""The device buffers a loaded plan owns for its lifetime: its static buffers (IREE globals and transients,
library outputs, plan memory slots), its lifted constants (weights; tied ones stored once), scratch copies
for aliased bindings, and whatever its layouts allocate. All go back to the runtime pool together."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from . import host_expr
from .device_array import free_all
from .format import LowIROp, Plan

TIED_MIN_BYTES = 1 << 16   # smaller constants are not worth comparing


def same_constant(held: dict[tuple, list[tuple[Any, Any]]], value: Any) -> Any:
    """What `held` ((shape, dtype) -> [(array, handle)]) keeps for an array bit-identical to `value`
    (a tied weight), or None; compares a few bytes first, so distinct weights cost almost nothing."""
    value = np.ascontiguousarray(value)
    if value.nbytes < TIED_MIN_BYTES:
        return None
    raw = value.reshape(-1).view(np.uint8)
    for other, handle in held.get((tuple(value.shape), value.dtype.str), ()):
        other_raw = np.ascontiguousarray(other).reshape(-1).view(np.uint8)
        if bytes(other_raw[:64]) == bytes(raw[:64]) and np.array_equal(other_raw, raw):
            return handle
    return None


class PlanBuffers:
    """Buffer ids by plan buffer name (`static`: name -> (buffer id, base offset)) and every id the plan
    owns (`owned`), freed by `release`."""

    def __init__(self, rt: Any):
        self.rt = rt
        self.owned: list[int] = []
        self.static: dict[str, tuple[int, int]] = {}
        self.scratch_buffers: dict[tuple[int, int], int] = {}   # (node key, binding slot) -> buffer
        self._scratch_pool: dict[int, list[tuple[int, int]]] = {}   # binding slot -> (bytes, buffer)

    def allocate(self, size: int) -> int:
        """A buffer that lives as long as the plan."""
        # Plan buffers, weights and scratch live as long as the plan: exact sizes, no bucket slack.
        buf = self.rt.allocate(max(int(size), 4), exact=True)
        self.owned.append(buf)
        return buf

    def place_static(self, plan: Plan, slots: Mapping[str, Any], slot_buffers: Mapping[str, int]) -> None:
        """A buffer for each of the plan's buffers of a static size: the caller's for a memory slot in
        `slots` (shared with plans that never run meanwhile: `slot_buffers`) where it is large enough,
        else a new one."""
        for name, size in plan.buffers.items():
            if not host_expr.is_static(size):
                continue
            given = slot_buffers.get(name) if name in slots else None
            if given is not None and self.rt.buffer(given).nbytes >= size:
                self.static[name] = (given, 0)   # a slot shared with plans that never run meanwhile
            else:
                self.static[name] = (self.allocate(size), 0)

    def place_constants(self, plan: Plan, shared: dict[str, int]) -> None:
        """A buffer for each lifted constant (the graph inputs after the user's): the one in `shared`
        (name -> buffer id, already on the device), one already placed for a bit-identical constant (a
        tied weight, then added to `shared`), or a new one, uploaded here unless an init node does it."""
        n_user = len(plan.inputs)
        uploaded = {n.args["constant"] for n in plan.init if n.op is LowIROp.UPLOAD_CONSTANT}
        held: dict[tuple, list[tuple[np.ndarray, int]]] = {}
        for j, (name, value) in enumerate(lifted_constants(plan)):
            if name in shared:
                self.static[f"in{n_user + j}"] = (shared[name], 0)
                continue
            twin = same_constant(held, value)
            if twin is not None:
                # a tied weight (an embedding and the LM head): one buffer serves both
                shared[name] = twin
                self.static[f"in{n_user + j}"] = (twin, 0)
                continue
            # Filled by the plan's UPLOAD_CONSTANT init nodes (plans saved before those existed: here).
            buf = self.allocate(max(value.nbytes, 4))
            if name not in uploaded:
                self.rt.upload(buf, np.ascontiguousarray(value))
            self.static[f"in{n_user + j}"] = (buf, 0)
            held.setdefault((tuple(value.shape), np.asarray(value).dtype.str), []).append((value, buf))

    def scratch(self, node_key: int, slot: int, nbytes: int) -> int:
        """A plan-owned buffer for a read-only copy of an aliased binding (chosen once per node). Nodes
        share them: one node's copy is used up before the next node's is written (commands run in order),
        so each binding slot needs only buffers as large as its largest copy, not one per node."""
        key = (node_key, slot)
        if key not in self.scratch_buffers:
            size = -(-nbytes // 4) * 4
            pool = self._scratch_pool.setdefault(slot, [])
            fits = [(n, buf) for n, buf in pool if n >= size]
            if fits:
                self.scratch_buffers[key] = min(fits)[1]
            else:
                pool.append((size, self.allocate(size)))
                self.scratch_buffers[key] = pool[-1][1]
        return self.scratch_buffers[key]

    def release(self) -> None:
        """Give every buffer the plan owns back to the runtime pool."""
        free_all(self.rt, self.owned)


def lifted_constants(plan: Plan) -> list[tuple[str, np.ndarray]]:
    """The constants the plan takes as trailing graph inputs, in order (the rest are IREE's inlined ones)."""
    return list(plan.constants.items())[:plan.num_constant_inputs]
