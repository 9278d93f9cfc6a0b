"""The native executor: a layout's per-call nodes as one native command program (runtime/native.py).

The Python executor (python_executor.SHADER_TO_FUNC) stays the reference; this turns the same resolved
nodes into commands once: plan buffers (globals, transients, lifted constants, read-only copies) are fixed
operands, graph inputs and device output tensors are per-call slots. A call then records every node from
C++ (`NativeLayout.run`).

Plans the native program does not cover keep the Python executor (an internal, per-layout choice that
`NativeUnsupported` names): patterned fills of a graph input, unaligned fills or copies (the Python
executor reports them), and constant uploads per call. A program that writes to a graph input runs only
when the call's input buffers are distinct; otherwise that call takes the Python executor, which decides
aliasing per call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from torch_webgpu.runtime import BufferSlice
from torch_webgpu.runtime.extension import buffer_handle
from torch_webgpu.runtime.native import NativeProgram, ProgramBuilder, Slot

from . import torch_tensors
from .buffers import PlanBuffers
from .call import CallState
from .device_array import DeviceArray
from .dtypes import spec_nbytes
from .format import LowIRNode, LowIROp, Plan
from .int64 import Int64Narrowing, widen_int32_launch
from .layout import Layout
from .outputs import check_output_size, finish
from .pipelines import PreparedDispatch

# Process-wide counts: native programs built, checked against the Python executor, and layouts left to
# it (reason -> count), for tests and benchmarks to report.
STATS: dict[str, Any] = {"built": 0, "checked": 0, "writes_inputs": 0, "unsupported": {}}


class NativeUnsupported(Exception):
    """This layout's nodes need the Python executor (the message says which node and why)."""


@dataclass
class NativeLayout:
    """A layout's native program and how a call fills its slots and reads its results."""

    program: NativeProgram
    input_slots: list[int]                 # graph input index per input slot, in slot order
    output_slots: list[int]                # plan output index per output slot, after the input slots
    results: dict[int, tuple] = field(default_factory=dict)   # output -> ("input", k) | ("host", off)
                                                              #         | ("device", slot)
    checked: bool = False                  # compared with the Python executor (TORCH_WEBGPU_EXECUTOR=check)
    # A command writes a graph input: the call's input buffers must be distinct (aliasing between them
    # is decided per call by the Python executor, which copies a read-only view of a written buffer).
    writes_inputs: bool = False

    @property
    def reads_back(self) -> bool:
        """True when some output goes to the host (the call ends with a download)."""
        return any(r[0] == "host" for r in self.results.values())

    def inputs_distinct(self, buffers: dict[str, tuple[int, int]]) -> bool:
        """True when the program's input slots are bound to different buffers this call."""
        ids = [buffers[f"in{k}"][0] for k in self.input_slots]
        return len(set(ids)) == len(ids)

    def input_words(self, buffers: dict[str, tuple[int, int]]) -> list[int]:
        """(GPU buffer handle, byte offset) of each input slot for this call's bound inputs, flattened."""
        pool = self.program.rt.pool
        slots: list[int] = []
        for k in self.input_slots:
            buf_id, base = buffers[f"in{k}"]
            slots += (buffer_handle(pool.get(buf_id)), base)
        return slots

    def record(self, state: CallState) -> None:
        """One call through the program: per-call buffers into its slots (new output tensors, or
        DeviceArrays for a resident call; then the int64 sources it narrows), then record it."""
        rt = self.program.rt
        pool = rt.pool
        slots = self.input_words(state.buffers)
        results = dict(self.results)
        if self.output_slots:
            layout = state.layout
            for i in self.output_slots:
                spec = layout.outputs[i]
                if state.resident:
                    buf = rt.allocate(max(spec_nbytes(spec), 4))
                    out = DeviceArray(rt, buf, spec.shape, spec.device_dtype)
                    slots += (buffer_handle(pool.get(out.buffer)), 0)
                else:
                    out = torch_tensors.empty(spec.shape, spec.dtype, state.to_device)
                    ptr = out.data_ptr()
                    # A fresh storage starts at offset 0; an empty one has no buffer (and no command uses it).
                    slots += (buffer_handle(pool.get(ptr >> 32 or layout.readback)), 0)
                results[i] = ("device", out)
        for _, buf_id, offset, _ in state.narrowed:   # int64 sources narrowed by the first dispatches
            slots += (buffer_handle(pool.get(buf_id)), offset)
        state.results = results
        # Outputs that stay on the device: C++ also submits (nothing to read back, no wait).
        self.program.record(tuple(slots), submit=not self.reads_back)
        if state.narrowed:
            rt.after_wait(state.narrowing.check_overflow)

    def run(self, state: CallState, args: Sequence[Any], as_numpy: bool) -> list[Any]:
        """Record the call and return its plan outputs."""
        self.record(state)
        return finish(state, args, as_numpy)


def _words(n: int) -> int:
    return -(-n // 4) * 4


def _identity(b: BufferSlice | Slot) -> tuple:
    """Which buffer an operand is: a fixed buffer id or a per-call input slot."""
    return ("slot", b.index) if isinstance(b, Slot) else ("buffer", b.buffer_id)


class _Builder:
    def __init__(self, layout: Layout, plan: Plan, buffers: PlanBuffers, narrowing: Int64Narrowing,
                 device_outputs: bool, narrowed: tuple[int, ...]):
        self.rt = buffers.rt
        self.plan_buffers = buffers
        self.plan_buffer_names = plan.buffers
        self.narrowing = narrowing
        self.layout = layout
        self.device_outputs = device_outputs
        self.narrowed = narrowed
        self.fixed = {**buffers.static, **layout.buffers}
        self.program = ProgramBuilder(self.rt)
        self.input_slots: list[int] = []
        self.output_slots: list[int] = []
        self.results: dict[int, tuple] = {}
        self.writes_inputs = False   # some command writes a graph input's buffer
        self.in_place = self._in_place_outputs()   # physical region -> output slot (before renumbering)

    def _physical(self, name: str, offset: int, size: int) -> tuple[int, int, int] | None:
        """(buffer id, start, size) of a range of one of the plan's own buffers (not an input or a weight);
        None for the others."""
        if name not in self.plan_buffer_names or name not in self.fixed:
            return None
        buf_id, base = self.fixed[name]
        return (buf_id, base + offset, size)

    def _in_place_outputs(self) -> dict[tuple[int, int, int], int]:
        """Device outputs the dispatches can write into the output tensor itself (no copy out): a per-call
        plan buffer range that only dispatch bindings of exactly that range touch, a writing one first,
        and no other output. A big output (a softmax of 128 MiB) otherwise costs a copy as long as its
        kernel."""
        if not self.device_outputs:
            return {}
        candidates: dict[tuple[int, int, int], int] = {}
        slot = 0
        for node in self.layout.main:   # output slots in the order output() hands them out
            a = node.args
            if node.op is not LowIROp.OUTPUT or "input" in a:
                continue
            spec = self.layout.outputs[a["index"]]
            widen = spec.dtype == "int64" and spec.device_dtype == "int32"
            if not (spec.device_dtype == spec.dtype or widen):
                continue
            region = self._physical(a["buffer"], a["offset"], a["size"])
            if region is not None and not widen and a["size"] and a["size"] % 4 == 0:
                candidates[region] = -1 if region in candidates else slot   # -1: two outputs share it
            slot += 1
        accesses: list[tuple[tuple[int, int, int] | None, str]] = []
        for node in self.layout.main:
            a = node.args
            if node.op is LowIROp.DISPATCH:
                _, slots, _, read_only, _ = self.layout.dispatches[id(node)]
                accesses += [(self._physical(*s), "read" if i in read_only else "write")
                             for i, s in enumerate(slots) if s is not None]
            elif node.op is LowIROp.FILL:
                accesses.append((self._physical(a["buffer"], a["offset"], a["size"]), "other"))
            elif node.op is LowIROp.COPY:
                accesses.append((self._physical(a["source"], a["source_offset"], a["size"]), "other"))
                accesses.append((self._physical(a["buffer"], a["offset"], a["size"]), "other"))
            elif node.op is LowIROp.OUTPUT and "input" not in a:
                accesses.append((self._physical(a["buffer"], a["offset"], a["size"]), "output"))
        in_place = {}
        for region, slot in candidates.items():
            buf_id, start, size = region
            touching = [(r, kind) for r, kind in accesses if r is not None and r[0] == buf_id
                        and r[1] < start + size and start < r[1] + r[2]]
            first = next((kind for r, kind in touching if kind != "output"), None)
            if (slot >= 0 and first == "write"
                    and all(r == region and kind in ("read", "write", "output") for r, kind in touching)
                    and sum(kind == "output" for _, kind in touching) == 1):
                in_place[region] = slot
        return in_place

    def _input_slot(self, k: int) -> int:
        if k not in self.input_slots:
            self.input_slots.append(k)
        return self.input_slots.index(k)

    def operand(self, name: str, offset: int, size: int) -> BufferSlice | Slot:
        """A plan buffer range as a fixed BufferSlice, or a Slot for a graph input or an output written
        in place."""
        if self.in_place:
            region = self._physical(name, offset, size)
            if region in self.in_place:
                return Slot(_OUTPUT_SLOT_MARK + self.in_place[region], 0, size)
        if name in self.fixed:
            buf_id, base = self.fixed[name]
            return BufferSlice(buf_id, base + offset, size)
        if name.startswith("in"):
            return Slot(self._input_slot(int(name[2:])), offset, size)
        raise NativeUnsupported(f"buffer {name} is neither a plan buffer nor an input")

    def dispatch(self, node: LowIRNode, prepared: PreparedDispatch) -> None:
        kernel, slots, uniform, read_only, workgroups = prepared
        bindings: list[Any] = [uniform if s is None else self.operand(*s) for s in slots]
        writable = {_identity(b) for i, b in enumerate(bindings)
                    if i not in read_only and isinstance(b, (BufferSlice, Slot))}
        self.writes_inputs |= any(kind == "slot" and index < _OUTPUT_SLOT_MARK for kind, index in writable)
        for i, b in enumerate(bindings):
            if i in read_only and isinstance(b, (BufferSlice, Slot)) and _identity(b) in writable:
                # As python_executor._run_dispatch: the read-only view reads a copy taken just before.
                scratch = self.plan_buffers.scratch(id(node), i, b.nbytes)
                self.program.copy(b, BufferSlice(scratch), _words(b.nbytes))
                bindings[i] = BufferSlice(scratch, 0, b.nbytes)
        self.program.dispatch(kernel, bindings, workgroups)

    def fill(self, node: LowIRNode) -> None:
        a = node.args
        dst = self.operand(a["buffer"], a["offset"], a["size"])
        if isinstance(dst, Slot):
            if a["pattern"] != 0 or (dst.offset | a["size"]) % 4:
                raise NativeUnsupported(f"fill of graph input {a['buffer']} with a pattern or unaligned")
            self.writes_inputs = True
            self.program.clear(dst, a["size"])
            return
        buf = self.rt.buffer(dst.buffer_id)
        if dst.offset % 4 or a["size"] % 4 or dst.offset + a["size"] > buf.aligned_nbytes:
            raise NativeUnsupported(f"fill {a}: unaligned or out of range (the Python executor reports it)")
        if a["pattern"] == 0:
            self.program.clear(dst, a["size"])
        elif a["size"]:
            self.program.dispatch(*self.rt.fill_launch(dst.buffer_id, a["pattern"], dst.offset, a["size"]))

    def copy(self, node: LowIRNode) -> None:
        a = node.args
        src = self.operand(a["source"], a["source_offset"], a["size"])
        dst = self.operand(a["buffer"], a["offset"], a["size"])
        self.writes_inputs |= isinstance(dst, Slot)
        if (src.offset | dst.offset | a["size"]) % 4:
            raise NativeUnsupported(f"copy {a}: unaligned (the Python executor reports it)")
        if type(src) is type(dst) and _identity(src) == _identity(dst):
            # WebGPU refuses a copy within one buffer: bounce through a plan-owned scratch buffer.
            scratch = self.plan_buffers.scratch(id(node), 0, a["size"])
            self.program.copy(src, BufferSlice(scratch), a["size"])
            src = BufferSlice(scratch)
        self.program.copy(src, dst, a["size"])

    def output(self, node: LowIRNode) -> None:
        a = node.args
        i = a["index"]
        if "input" in a:
            self.results[i] = ("input", a["input"])
            return
        spec = self.layout.outputs[i]
        check_output_size(i, spec, a["size"])
        src = self.operand(a["buffer"], a["offset"], a["size"])
        size = _words(a["size"])
        widen = spec.dtype == "int64" and spec.device_dtype == "int32"
        if self.device_outputs and (spec.device_dtype == spec.dtype or widen):
            slot = len(self.output_slots)   # offset by the input slot count once all nodes are seen
            self.output_slots.append(i)
            self.results[i] = ("device", slot)
            count = 1
            for d in spec.shape:
                count *= int(d)
            if widen and count:
                if isinstance(src, Slot):
                    raise NativeUnsupported(f"int64 output {i} read from a graph input")
                kernel, grid, params = widen_int32_launch(self.rt, src.offset, 0, count)
                dst = Slot(_OUTPUT_SLOT_MARK + slot, 0, 8 * count)
                self.program.dispatch(kernel, [src.buffer_id, dst, self.rt.constant(params)], grid)
            elif size and not widen and not (isinstance(src, Slot) and src.index == _OUTPUT_SLOT_MARK + slot):
                self.program.copy(src, Slot(_OUTPUT_SLOT_MARK + slot, 0, size), size)
        else:
            off = self.layout.readback_offsets[i]
            self.program.copy(src, BufferSlice(self.layout.readback, off), size)
            self.results[i] = ("host", off)

    def narrow(self) -> None:
        """First, each int64 input (a slot after the outputs) narrowed into its int32 input buffer."""
        for j, k in enumerate(self.narrowed):
            count = 1
            for d in self.layout.shapes[k]:
                count *= int(d)
            kernel, params, flag, grid = self.narrowing.launch(0, count)
            dst = BufferSlice(self.layout.host_inputs[f"in{k}"][0], 0, 4 * count)
            src = Slot(_NARROW_SLOT_MARK + j, 0, 8 * count)
            self.program.dispatch(kernel, [src, dst, flag, params], grid)

    def build(self) -> NativeLayout:
        self.narrow()
        for node in self.layout.main:
            op = node.op
            if op is LowIROp.DISPATCH:
                self.dispatch(node, self.layout.dispatches[id(node)])
            elif op is LowIROp.FILL:
                self.fill(node)
            elif op is LowIROp.COPY:
                self.copy(node)
            elif op is LowIROp.OUTPUT:
                self.output(node)
            elif op is LowIROp.UPLOAD_CONSTANT:
                raise NativeUnsupported("a constant upload among the per-call nodes")
        # Output slots follow the input slots: renumber the placeholders now that both are known.
        base = len(self.input_slots)
        self.program.commands = [_renumber(c, base, base + len(self.output_slots))
                                 for c in self.program.commands]
        return NativeLayout(self.program.build(), self.input_slots, self.output_slots, self.results,
                            writes_inputs=self.writes_inputs)


# Output and narrowed-input slots are numbered from these while building, then renumbered to follow
# the input slots (inputs, outputs, narrowed int64 sources).
_OUTPUT_SLOT_MARK = 1 << 20
_NARROW_SLOT_MARK = 2 << 20


def _renumber(command: tuple, outputs: int, narrowed: int) -> tuple:
    def fix(slot: int) -> int:
        if slot >= _NARROW_SLOT_MARK:
            return slot - _NARROW_SLOT_MARK + narrowed
        return slot - _OUTPUT_SLOT_MARK + outputs if slot >= _OUTPUT_SLOT_MARK else slot

    kind = command[0]
    if kind == 0:
        entries = tuple((b, h, fix(s), o, n) for b, h, s, o, n in command[6])
        return (*command[:6], entries)
    if kind == 1:
        return (1, command[1], fix(command[2]), command[3], command[4], fix(command[5]), *command[6:])
    return (2, command[1], fix(command[2]), *command[3:])


def build_native_layout(layout: Layout, plan: Plan, buffers: PlanBuffers, narrowing: Int64Narrowing,
                        device_outputs: bool, narrowed: tuple[int, ...] = ()) -> NativeLayout:
    """The native program of one layout of `plan` (whose buffers and int64 narrowing are `buffers` and
    `narrowing`): device or host outputs, int64 inputs `narrowed` on the device by its first dispatches;
    raises NativeUnsupported for nodes it does not cover."""
    try:
        native = _Builder(layout, plan, buffers, narrowing, device_outputs, narrowed).build()
    except NativeUnsupported as exc:
        reason = str(exc)
        STATS["unsupported"][reason] = STATS["unsupported"].get(reason, 0) + 1
        raise
    STATS["built"] += 1
    STATS["writes_inputs"] += native.writes_inputs
    return native
