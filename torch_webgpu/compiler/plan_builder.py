"""Builds the low IR plan from IREE's extracted host program and the translated WGSL executables."""

from __future__ import annotations

from typing import Any

import numpy as np

from mlir_passes import host_expr
from mlir_passes.host_program import BufferRef, HostProgram

from .low_ir import ExecutableSpec, LowIRNode, LowIROp, Plan, TensorSpec


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
