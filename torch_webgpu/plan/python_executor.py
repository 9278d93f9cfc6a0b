"""The Python executor, the reference: each plan node recorded through the runtime's Python API
(`SHADER_TO_FUNC`: LowIROp -> the function that executes it). It runs every node the format has, decides
aliasing per call, and is what the native executor is checked against (check.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from torch_webgpu.runtime import BufferSlice

from . import torch_tensors
from .call import CallState
from .device_array import DeviceArray
from .format import LowIRNode, LowIROp
from .int64 import widen_int32
from .outputs import check_output_size, finish


def _run_dispatch(state: CallState, node: LowIRNode) -> None:
    kernel, slots, uniform, read_only, workgroups = state.dispatches[id(node)]
    bindings: list[Any] = [uniform if slot is None else state.slice(*slot) for slot in slots]
    writable = {b.buffer_id for i, b in enumerate(bindings)
                if isinstance(b, BufferSlice) and i not in read_only}
    for i, b in enumerate(bindings):
        if i in read_only and isinstance(b, BufferSlice) and b.buffer_id in writable:
            # IREE may bind one buffer read-only and read-write in one dispatch; WebGPU forbids a
            # writable buffer in two bindings, so the read-only view reads a copy taken just before.
            scratch = state.plan_buffers.scratch(id(node), i, b.nbytes)
            state.rt.copy(b.buffer_id, scratch, -(-b.nbytes // 4) * 4, b.offset, 0)
            bindings[i] = BufferSlice(scratch, 0, b.nbytes)
    state.rt.dispatch(kernel, bindings, workgroups, label=node.args["entry_point"])


def _run_fill(state: CallState, node: LowIRNode) -> None:
    a = node.args
    buf_id, base = state.buffers[a["buffer"]]
    state.rt.fill(buf_id, a["pattern"], base + a["offset"], a["size"])


def _run_copy(state: CallState, node: LowIRNode) -> None:
    a = node.args
    src, sbase = state.buffers[a["source"]]
    dst, dbase = state.buffers[a["buffer"]]
    if src == dst:
        # WebGPU refuses a copy within one buffer (IREE emits them inside transient buffers): bounce.
        scratch = state.plan_buffers.scratch(id(node), 0, a["size"])
        state.rt.copy(src, scratch, a["size"], sbase + a["source_offset"], 0)
        src, sbase, a = scratch, 0, {**a, "source_offset": 0}
    state.rt.copy(src, dst, a["size"], sbase + a["source_offset"], dbase + a["offset"])


def _run_upload(state: CallState, node: LowIRNode) -> None:
    buf_id, base = state.buffers[node.args["buffer"]]
    state.rt.upload(buf_id, np.ascontiguousarray(state.constants[node.args["constant"]]), base)


def _nothing(state: CallState, node: LowIRNode) -> None:
    """Allocation, free and barriers need no command: buffers live with the plan, and WebGPU orders
    storage accesses between the dispatches of a pass."""


def _run_output(state: CallState, node: LowIRNode) -> None:
    """Record where output `index` is: copied into the readback buffer (host), a new device tensor of the
    inputs' device, or a new DeviceArray (a resident output)."""
    a = node.args
    if "input" in a:
        state.results[a["index"]] = ("input", a["input"])
        return
    rt = state.rt
    layout = state.layout
    spec = layout.outputs[a["index"]]
    check_output_size(a["index"], spec, a["size"])
    src, base = state.buffers[a["buffer"]]
    size = -(-a["size"] // 4) * 4
    if a["index"] in state.resident:
        buf = rt.allocate(max(size, 4))
        if size:
            rt.copy(src, buf, size, base + a["offset"], 0)
        state.results[a["index"]] = ("device", DeviceArray(rt, buf, spec.shape, spec.device_dtype))
        return
    widen = spec.dtype == "int64" and spec.device_dtype == "int32"
    if state.to_device is not None and (spec.device_dtype == spec.dtype or widen):
        out = torch_tensors.empty(spec.shape, spec.dtype, state.to_device)
        ptr = out.data_ptr()
        if widen and out.numel():
            widen_int32(rt, src, base + a["offset"], ptr >> 32, ptr & 0xFFFFFFFF, out.numel())
        elif size:
            rt.copy(src, ptr >> 32, size, base + a["offset"], ptr & 0xFFFFFFFF)
        state.results[a["index"]] = ("device", out)
    else:
        off = layout.readback_offsets[a["index"]]
        rt.copy(src, layout.readback, size, base + a["offset"], off)
        state.results[a["index"]] = ("host", off)


# Each LowIROp and the runtime function that executes it.
SHADER_TO_FUNC: dict[LowIROp, Callable[[CallState, LowIRNode], None]] = {
    LowIROp.ALLOCATE: _nothing,
    LowIROp.FREE: _nothing,
    LowIROp.BARRIER: _nothing,
    LowIROp.UPLOAD_CONSTANT: _run_upload,
    LowIROp.DISPATCH: _run_dispatch,
    LowIROp.FILL: _run_fill,
    LowIROp.COPY: _run_copy,
    LowIROp.OUTPUT: _run_output,
}


def run_nodes(state: CallState, nodes: Sequence[LowIRNode]) -> None:
    """Record `nodes` in order."""
    for node in nodes:
        SHADER_TO_FUNC[node.op](state, node)


class PythonExecutor:
    """A call on the Python executor: int64 inputs left to narrow first, then every per-call node."""

    def run(self, state: CallState, args: Sequence[Any], as_numpy: bool) -> list[Any]:
        """Record the call and return its plan outputs."""
        for k, buf, offset, count in state.narrowed:
            state.narrowing.narrow(buf, offset, state.layout.host_inputs[f"in{k}"][0], count)
        run_nodes(state, state.layout.main)
        return finish(state, args, as_numpy)


PYTHON_EXECUTOR = PythonExecutor()
