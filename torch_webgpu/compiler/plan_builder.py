"""Builds the low IR plan from IREE's extracted host program and the translated WGSL executables."""

from __future__ import annotations

from typing import Any

import numpy as np

from mlir_passes.host_program import BufferRef, HostProgram
from torch_webgpu.plan import host_expr
from torch_webgpu.plan.format import ExecutableSpec, LowIRNode, LowIROp, Plan, TensorSpec


def buffer_name(ref: BufferRef) -> str:
    """The plan's name for a host buffer: in<k>, g<k> or t<k>."""
    return {"input": "in", "global": "g", "transient": "t"}[ref.kind] + str(ref.index)


def _nodes(commands: list, executables: dict[str, ExecutableSpec]) -> list[LowIRNode]:
    nodes = []
    for c in commands:
        if c.kind == "alloca":
            nodes.append(LowIRNode(LowIROp.ALLOCATE, {"buffer": buffer_name(c.buffer)}))
        elif c.kind == "dealloca":
            nodes.append(LowIRNode(LowIROp.FREE, {"buffer": buffer_name(c.buffer)}))
        elif c.kind == "barrier":
            nodes.append(LowIRNode(LowIROp.BARRIER))
        elif c.kind == "fill":
            nodes.append(LowIRNode(LowIROp.FILL, {"buffer": buffer_name(c.buffer), "offset": c.offset,
                                                  "size": c.size, "pattern": c.pattern}))
        elif c.kind == "copy":
            nodes.append(LowIRNode(LowIROp.COPY, {"source": buffer_name(c.source),
                                                  "source_offset": c.source_offset,
                                                  "buffer": buffer_name(c.buffer), "offset": c.offset,
                                                  "size": c.size}))
        elif c.kind == "upload":
            nodes.append(LowIRNode(LowIROp.UPLOAD_CONSTANT, {"buffer": buffer_name(c.buffer),
                                                             "constant": c.constant}))
        elif c.kind == "dispatch":
            if c.entry_point not in executables:
                raise KeyError(f"dispatch of {c.entry_point}: no translated executable for it")
            nodes.append(LowIRNode(LowIROp.DISPATCH, {
                "entry_point": c.entry_point, "workgroups": list(c.workgroups), "constants": c.constants,
                "bindings": [[buffer_name(b.buffer), b.offset, b.length] for b in c.bindings]}))
        else:
            raise ValueError(f"unknown host command {c.kind}")
    return nodes


def written_inputs(nodes: list[LowIRNode], executables: dict[str, ExecutableSpec]
                   ) -> dict[int, list[tuple[Any, Any]]]:
    """The (byte offset, size) ranges of each input `in<k>` that `nodes` write: IREE updates an argument
    in place (index_put into a KV cache writes into the cache argument)."""
    written: dict[int, list[tuple[Any, Any]]] = {}

    def mark(name: str, offset: Any, size: Any) -> None:
        if name.startswith("in") and name[2:].isdigit():
            written.setdefault(int(name[2:]), []).append((offset, size))

    for node in nodes:
        a = node.args
        if node.op is LowIROp.DISPATCH:
            spec = executables[a["entry_point"]]
            read_only = {int(w) for w in spec.read_only}
            writable = {int(h) for w, h in spec.binding_map.items() if int(w) not in read_only}
            for h, (name, offset, size) in enumerate(a["bindings"]):
                if h in writable:
                    mark(name, offset, size)
        elif node.op in (LowIROp.FILL, LowIROp.COPY):
            mark(a["buffer"], a["offset"], a["size"])
    return written


def _input_nbytes(spec: TensorSpec, k: int) -> Any:
    """Bytes of input k (an expression of its dims for dynamic=True)."""
    size: Any = np.dtype(spec.device_dtype).itemsize
    for axis, d in enumerate(spec.shape):
        size = host_expr.fold("muli", size, host_expr.dim(k, axis) if d is None else int(d))
    return size


def copy_written_inputs(plan: Plan) -> Plan:
    """`plan` with each input that IREE writes in place (the caller's tensor, or a lifted constant that
    the next call reads again) copied into a plan buffer first, and every use of it moved there."""
    written = written_inputs(plan.main, plan.executables)
    if not written:
        return plan
    n_user = len(plan.inputs)
    renamed: dict[str, str] = {}
    head = []
    for k in sorted(written):
        if k < n_user:
            nbytes = host_expr.fold("align", _input_nbytes(plan.inputs[k], k), 4)
        else:
            nbytes = -(-int(list(plan.constants.values())[k - n_user].nbytes) // 4) * 4
        name = f"in{k}_copy"
        plan.buffers[name] = nbytes
        renamed[f"in{k}"] = name
        head.append(LowIRNode(LowIROp.COPY, {"source": f"in{k}", "source_offset": 0, "buffer": name,
                                             "offset": 0, "size": nbytes}))
    main = []
    for node in plan.main:
        a = dict(node.args)
        if node.op is LowIROp.DISPATCH:
            a["bindings"] = [[renamed.get(b, b), o, n] for b, o, n in a["bindings"]]
        elif node.op in (LowIROp.FILL, LowIROp.COPY):
            a["buffer"] = renamed.get(a["buffer"], a["buffer"])
            if node.op is LowIROp.COPY:
                a["source"] = renamed.get(a["source"], a["source"])
        elif node.op is LowIROp.OUTPUT:
            if "input" in a and f"in{a['input']}" in renamed:
                k = a.pop("input")
                a.update(buffer=renamed[f"in{k}"], offset=0, size=_input_nbytes(plan.inputs[k], k))
            elif "buffer" in a:
                a["buffer"] = renamed.get(a["buffer"], a["buffer"])
        main.append(LowIRNode(node.op, a))
    plan.main = head + main
    return plan


def build_plan(host: HostProgram, executables: dict[str, ExecutableSpec], wgsl: dict[str, str],
               inputs: list[TensorSpec], outputs: list[TensorSpec], output_map: list[int | None],
               constants: dict[str, Any]) -> Plan:
    """The Plan of one compiled graph (inputs include the trailing lifted constants)."""
    if host.num_inputs != len(inputs):
        raise ValueError(f"host program takes {host.num_inputs} inputs, the graph has {len(inputs)}")
    if len(host.outputs) != len(outputs):
        raise ValueError(f"host program returns {len(host.outputs)} values, the graph {len(outputs)}")
    buffers = {buffer_name(BufferRef("global", k)): v for k, v in host.globals.items()}
    buffers.update({buffer_name(BufferRef("transient", k)): v for k, v in host.transients.items()})
    main = _nodes(host.main, executables)
    n_user_inputs = len(inputs) - len(constants)
    for i, (view, spec) in enumerate(zip(host.outputs, outputs, strict=False)):
        if None in spec.shape:
            # dynamic=True: the host program's view shape holds the expressions of the symbolic dims.
            if view.input_index is not None:
                spec.shape = [host_expr.dim(view.input_index, a) for a in range(len(spec.shape))]
            elif len(view.shape) != len(spec.shape):
                raise ValueError(f"output {i}: host view rank {len(view.shape)}, "
                                 f"graph rank {len(spec.shape)}")
            else:
                spec.shape = [d if s is None else s for s, d in zip(spec.shape, view.shape, strict=True)]
        if view.input_index is not None and view.input_index >= n_user_inputs:
            # A lifted constant returned as it is (a buffer the model registered): read its buffer.
            value = list(constants.values())[view.input_index - n_user_inputs]
            main.append(LowIRNode(LowIROp.OUTPUT, {"index": i, "buffer": f"in{view.input_index}",
                                                   "offset": 0, "size": int(value.nbytes)}))
            continue
        if view.input_index is not None:
            main.append(LowIRNode(LowIROp.OUTPUT, {"index": i, "input": view.input_index}))
            continue
        main.append(LowIRNode(LowIROp.OUTPUT, {"index": i, "buffer": buffer_name(view.buffer),
                                               "offset": view.offset, "size": view.length}))
    n_user = len(inputs) - len(constants)
    uploads = []
    for j, name in enumerate(constants):
        uploads.append(LowIRNode(LowIROp.ALLOCATE, {"buffer": f"in{n_user + j}"}))
        uploads.append(LowIRNode(LowIROp.UPLOAD_CONSTANT, {"buffer": f"in{n_user + j}", "constant": name}))
    # IREE's inlined constants follow the lifted ones; only the first num_constant_inputs are inputs.
    inlined = {name: np.frombuffer(data + b"\0" * (-len(data) % 4), dtype=np.uint8)
               for name, data in host.constants.items()}
    return Plan(inputs=inputs[:n_user], outputs=outputs, output_map=output_map,
                buffers=buffers, init=uploads + _nodes(host.initializer, executables), main=main,
                executables=executables, wgsl=wgsl, constants={**constants, **inlined},
                num_constant_inputs=len(constants))
