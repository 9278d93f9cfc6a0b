"""Composes ONE plan from IREE segment plans and library dispatches (see partition.py).

A segment's buffers and inlined constants get a prefix (none when all segments come from one IREE
module, whose buffer ids and constants are already unique); its inputs `in<k>` are
rebound to wherever the value lives (a graph input, a lifted constant, an earlier segment's output or a
library output) by rewriting binding, copy and fill ranges. A library op becomes a DISPATCH node whose
ExecutableSpec carries the library WGSL with `push_constant_binding` = its params uniform, so the
executor's push-constant path feeds the params and bundles need nothing new.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from torch_webgpu.kernels.launch import PARAMS, KernelLaunch
from torch_webgpu.plan.format import ExecutableSpec, LowIRNode, LowIROp, Plan, TensorSpec

ALIGN = 256


def _transient(name: str) -> bool:
    """Whether plan buffer `name` is one of IREE's per-call buffers (plan_builder.buffer_name: t<k>)."""
    return name.startswith("t") and name[1:].isdigit()


class PlanComposer:
    """Accumulates segment plans and library launches into one Plan."""

    def __init__(self, inputs: list[TensorSpec], constants: dict[str, np.ndarray]):
        n_user = len(inputs)
        self.inputs = inputs
        self.lifted = constants
        self.buffers: dict[str, Any] = {}
        self.init: list[LowIRNode] = []
        self.main: list[LowIRNode] = []
        self.executables: dict[str, ExecutableSpec] = {}
        self.wgsl: dict[str, str] = {}
        self.constants: dict[str, np.ndarray] = dict(constants)
        self.spirv: dict[str, bytes] = {}
        self.dispatch_kinds: list[tuple[str, str]] = []   # (entry point, "library:<variant>" or "iree")
        self.library_entries: dict[str, str] = {}         # entry point -> variant, tuning's too
        for j, name in enumerate(constants):
            self.init.append(LowIRNode(LowIROp.ALLOCATE, {"buffer": f"in{n_user + j}"}))
            self.init.append(LowIRNode(LowIROp.UPLOAD_CONSTANT, {"buffer": f"in{n_user + j}",
                                                                 "constant": name}))

    # -- segments --
    def add_segment(self, prefix: str, plan: Plan, bound_inputs: list[tuple[str, int]],
                    repeat: bool = False) -> list[tuple[str, int]]:
        """Append a segment plan whose input k lives at `bound_inputs[k]`; the locations of its outputs.
        `repeat`: the plan was added before (an identical segment, segment_dedupe.py): only its per-call
        (transient) buffers get `prefix`, its module's globals, initializers and constants are there."""
        if len(bound_inputs) != len(plan.inputs):
            raise ValueError(f"segment {prefix}: {len(plan.inputs)} inputs, {len(bound_inputs)} bound")
        if plan.num_constant_inputs:
            raise ValueError(f"segment {prefix}: lifted constants must be graph inputs of the segment")

        def local(name: str) -> str:
            return prefix + name if not repeat or _transient(name) else name

        def where(name: str, offset: int) -> tuple[str, int]:
            if name.startswith("in") and name[2:].isdigit():
                buf, base = bound_inputs[int(name[2:])]
                return buf, base + offset
            return local(name), offset

        def rename(node: LowIRNode) -> LowIRNode:
            a = dict(node.args)
            if node.op in (LowIROp.ALLOCATE, LowIROp.FREE):
                if a["buffer"].startswith("in"):
                    return None  # type: ignore[return-value]
                a["buffer"] = local(a["buffer"])
            elif node.op is LowIROp.DISPATCH:
                a["bindings"] = [[*where(b, o), n] for b, o, n in a["bindings"]]
            elif node.op is LowIROp.UPLOAD_CONSTANT:
                a["buffer"], _ = where(a["buffer"], 0)
                a["constant"] = prefix + a["constant"]
            elif node.op in (LowIROp.FILL, LowIROp.COPY):
                a["buffer"], a["offset"] = where(a["buffer"], a["offset"])
                if node.op is LowIROp.COPY:
                    a["source"], a["source_offset"] = where(a["source"], a["source_offset"])
            return LowIRNode(node.op, a)

        for name, size in plan.buffers.items():
            if not repeat or _transient(name):
                self.buffers[local(name)] = size
        if not repeat:
            self.init += [n for n in map(rename, plan.init) if n is not None]
        outputs: dict[int, tuple[str, int]] = {}
        for node in plan.main:
            if node.op is LowIROp.OUTPUT:
                a = node.args
                outputs[a["index"]] = (bound_inputs[a["input"]] if "input" in a
                                       else where(a["buffer"], a["offset"]))
                continue
            renamed = rename(node)
            if renamed is not None:
                self.main.append(renamed)
                if node.op is LowIROp.DISPATCH:
                    self.dispatch_kinds.append((node.args["entry_point"], "iree"))
        for key, spec in plan.executables.items():
            if self.executables.setdefault(key, spec) != spec:
                raise ValueError(f"segment {prefix}: entry point {key} is already another one in the plan")
        self.wgsl.update(plan.wgsl)
        self.spirv.update(plan.spirv)
        if not repeat:
            for name, value in plan.constants.items():
                self.constants[prefix + name] = value
        return [outputs[i] for i in range(len(plan.outputs))]

    def add_copy(self, name: str, source: tuple[str, int], nbytes: int) -> tuple[str, int]:
        """A new buffer `name` holding a copy of `nbytes` at `source` (made at this point of the call)."""
        size = -(-int(nbytes) // 4) * 4   # copies move whole words
        where = self.new_buffer(name, size)
        self.main.append(LowIRNode(LowIROp.COPY, {"source": source[0], "source_offset": source[1],
                                                  "buffer": name, "offset": 0, "size": size}))
        return where

    # -- library --
    def new_buffer(self, name: str, nbytes: int) -> tuple[str, int]:
        """A plan buffer for a library output."""
        self.buffers[name] = max(4, -(-int(nbytes) // ALIGN) * ALIGN)
        return name, 0

    def add_library(self, launch: KernelLaunch, operands: dict[str, tuple[str, int, int]],
                    tunable: Any = None) -> str:
        """A DISPATCH of `launch` with `operands[role]` = (buffer, byte offset, byte length). With
        `tunable` (operands.Tunable: its launches, the default first, solve the same problem), the
        node also carries every variant under "tune", and the executor that loads the plan times them
        once on its own device and runs the winner (plan/tuning.py). A variant of several
        dispatches (`tunable.then[i]`) lists the ones after its first under "then"; the default (the node
        itself, which an executor that does not tune runs) is one dispatch."""
        key, args = self._library_dispatch(launch, operands)
        if tunable is not None and len(tunable.launches) > 1:
            if tunable.then and tunable.then[0]:
                raise NotImplementedError(f"library op {launch.name}: a default variant of several "
                                          "dispatches (the tunable node runs the default alone)")
            variants = [{"variant": launch.name, **args}]
            for i, other in enumerate(tunable.launches[1:], 1):
                _, other_args = self._library_dispatch(other, operands)
                then = tunable.then[i] if i < len(tunable.then) else ()
                if then:
                    other_args["then"] = [self._library_dispatch(step, operands)[1] for step in then]
                variants.append({"variant": other.name, **other_args})
            args["tune"] = {"key": tunable.key, "flops": int(tunable.flops), "variants": variants}
        self.main.append(LowIRNode(LowIROp.DISPATCH, args))
        self.dispatch_kinds.append((key, f"library:{launch.name}"))
        return key

    def _library_dispatch(self, launch: KernelLaunch, operands: dict[str, tuple[str, int, int]]
                          ) -> tuple[str, dict[str, Any]]:
        """The executable of `launch` (registered once) and its DISPATCH args."""
        digest = hashlib.sha256(launch.wgsl.encode()).hexdigest()[:10]
        key = f"lib_{launch.name}_{digest}".replace(".", "_")
        self.library_entries[key] = launch.name
        host_bindings, binding_map = [], {}
        for slot, role in enumerate(launch.bindings):
            if role == PARAMS:
                continue
            binding_map[slot] = len(host_bindings)
            host_bindings.append(list(operands[role]))
        if key not in self.executables:
            self.executables[key] = ExecutableSpec(
                entry_point=launch.entry_point, wgsl_file=f"{key}.wgsl",
                workgroup_size=list(launch.workgroup_size), binding_map=binding_map,
                push_constant_binding=launch.params_binding, push_constant_count=len(launch.params),
                read_only=sorted(launch.read_only))
            self.wgsl[f"{key}.wgsl"] = launch.wgsl
        return key, {"entry_point": key, "workgroups": list(launch.grid), "constants": list(launch.params),
                     "bindings": host_bindings}

    # -- the plan --
    def plan(self, outputs: list[TensorSpec], output_map: list, output_locations: list) -> Plan:
        """The composed plan; `output_locations[i]`: ("input", k) or (buffer, byte offset, size)."""
        main = list(self.main)
        for i, loc in enumerate(output_locations):
            if loc[0] == "input":
                main.append(LowIRNode(LowIROp.OUTPUT, {"index": i, "input": loc[1]}))
            else:
                main.append(LowIRNode(LowIROp.OUTPUT, {"index": i, "buffer": loc[0], "offset": loc[1],
                                                       "size": loc[2]}))
        return Plan(inputs=self.inputs, outputs=outputs, output_map=output_map, buffers=self.buffers,
                    init=self.init, main=main, executables=self.executables, wgsl=self.wgsl,
                    constants=self.constants, num_constant_inputs=len(self.lifted), spirv=self.spirv)

    def dispatches_text(self) -> str:
        """One line per dispatch of a call: kind and entry point (TORCH_WEBGPU_DUMP_DIR/dispatches.txt)."""
        return "".join(f"{kind}\t{entry}\n" for entry, kind in self.dispatch_kinds)
