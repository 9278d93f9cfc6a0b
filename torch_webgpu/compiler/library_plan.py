"""The compiled path with library dispatches: matmuls (with their epilogues) run the kernel library's
WGSL, IREE compiles the segments between them, and one plan holds both.

`TORCH_WEBGPU_LIBRARY=0` compiles everything with IREE. Dynamic graphs (dynamic=True) always do.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch

from torch_webgpu.config import LIBRARY
from torch_webgpu.kernels.launch import DeviceCaps
from torch_webgpu.plan.dtypes import device_dtype
from torch_webgpu.plan.format import Plan, TensorSpec

from .families.quant import repack
from .fx_import import PreparedGraph, _bool_boundaries_as_int32
from .operands import value_of
from .partition import Partition, Segment, partition, segment_graph
from .segment_dedupe import unique_segments


def placeholders_of(prepared: PreparedGraph) -> list[torch.fx.Node]:
    """The placeholders of a prepared graph: user inputs, then the lifted constants."""
    return [n for n in prepared.graph_module.graph.nodes if n.op == "placeholder"]

log = logging.getLogger(__name__)


def library_enabled() -> bool:
    """False when TORCH_WEBGPU_LIBRARY=0 (everything through IREE)."""
    return LIBRARY.read()


def caps_for_target(target: Any) -> DeviceCaps:
    """The DeviceCaps a plan compiled for `target` (a WebGPUTarget) may use: its limits and features only,
    so a plan built for another machine (or `webgpu-core`) picks variants that run there."""
    features = set()
    if target.shader_f16:
        features.add("shader-f16")
    if target.subgroup_size:
        features.add("subgroups")
    limits = {"max-compute-invocations-per-workgroup": target.max_threads,
              "max-compute-workgroup-size-x": target.max_workgroup_sizes[0],
              "max-compute-workgroup-size-y": target.max_workgroup_sizes[1],
              "max-compute-workgroup-size-z": target.max_workgroup_sizes[2],
              "max-compute-workgroup-storage-size": target.workgroup_memory_bytes,
              "max-compute-workgroups-per-dimension": target.max_workgroup_count,
              "max-storage-buffers-per-shader-stage": target.storage_buffers_per_stage,
              "max-storage-buffer-binding-size": target.max_binding_bytes,
              "min-storage-buffer-offset-alignment": target.offset_alignment}
    if target.subgroup_size:
        limits["subgroup-min-size"] = limits["subgroup-max-size"] = target.subgroup_size
    configs = tuple(getattr(target, "subgroup_matrix_configs", ()) or ())
    if configs:
        features.add("chromium-experimental-subgroup-matrix")   # tensor-core f16 matmuls
    return DeviceCaps(features=frozenset(features), limits=limits, subgroup_size=target.subgroup_size,
                      subgroup_matrix_configs=configs)


def _static(example_inputs: list[Any]) -> bool:
    return all(isinstance(v, torch.Tensor) and all(isinstance(d, int) for d in v.shape)
               for v in example_inputs)


def plan_partition(prepared: PreparedGraph, example_inputs: list[Any], target: Any) -> Partition | None:
    """The partition of a prepared graph when the library applies to it, else None (all IREE)."""
    if not library_enabled() or not _static(example_inputs):
        return None
    return partition(prepared.graph_module, caps_for_target(target))


def _nbytes(val: torch.Tensor) -> int:
    return int(val.numel()) * torch.empty((), dtype=getattr(torch, device_dtype(val.dtype))).element_size()


def compile_partitioned(prepared: PreparedGraph, part: Partition, inputs: list[TensorSpec],
                        outputs: list[TensorSpec], constants: dict[str, np.ndarray], target: Any,
                        compile_segments: Any) -> tuple[Plan, str]:
    """One plan from the partition: `compile_segments([(gm, name, output values)])` compiles the segment
    graphs (in one IREE invocation) to one Plan each. Returns the plan and the dispatches listing."""
    from .plan_builder import written_inputs
    from .plan_compose import PlanComposer

    segments = []
    for index, step in enumerate(part.steps):
        if not isinstance(step, Segment):
            continue
        gm = segment_graph(step, part.forced)
        # Bool values cross segment boundaries as int32, as graph inputs and outputs do.
        output = next(n for n in gm.graph.nodes if n.op == "output")
        kept = _bool_boundaries_as_int32(gm.graph, list(output.args[0]))
        output.args = (tuple(kept),)
        gm.recompile()
        segments.append((gm, f"seg{index}", [value_of(r) for r in kept]))
    # Identical segments (repeated blocks) compile once; a repeat reuses the first one's plan.
    first = unique_segments([gm for gm, _, _ in segments])
    unique = sorted(set(first))
    compiled = dict(zip(unique, compile_segments([segments[k] for k in unique]) if unique else [],
                        strict=True))
    segment_plans = iter([(compiled[j], j != k) for k, j in enumerate(first)])

    caps = caps_for_target(target)
    n_user = len(inputs)
    members = [m for op in part.library_ops for m in getattr(op, "members", [op])]   # grouped linears' too
    constants, packed = repack(members, placeholders_of(prepared)[n_user:], constants)
    composer = PlanComposer(inputs, constants)
    graph = prepared.graph_module.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    where: dict[torch.fx.Node, tuple[str, int]] = {ph: (f"in{k}", 0) for k, ph in enumerate(placeholders)}
    # Where each value lives, for the hazards of in-place writes: (buffer, start, end, node).
    placed: list[tuple[str, int, int, torch.fx.Node]] = [
        (f"in{k}", 0, _nbytes(value_of(ph)), ph) for k, ph in enumerate(placeholders)
        if isinstance(value_of(ph), torch.Tensor)]
    last_read = _last_reads(part)
    # The caller's tensors and the lifted constants are read again after the call: never written.
    last_read.update({ph: len(part.steps) for ph in placeholders})
    for index, step in enumerate(part.steps):
        if not isinstance(step, Segment):
            operands = {}
            for role, operand in step.roles().items():
                buf, offset = where[operand.base]
                nbytes = getattr(step, "binding_bytes", lambda _: None)(role)   # a repacked constant
                operands[role] = (buf, offset, nbytes or _nbytes(value_of(operand.base)))
            name = f"lib{index}"
            if hasattr(step, "finals"):   # grouped linears: every member's result in one buffer
                offsets, out_bytes = step.out_offsets()
                composer.new_buffer(name, out_bytes)
                for final, offset in zip(step.finals, offsets, strict=True):
                    where[final] = (name, offset)
                    placed.append((name, offset, offset + _nbytes(value_of(final)), final))
            else:
                out_bytes = _nbytes(value_of(step.final))
                where[step.final] = composer.new_buffer(name, out_bytes)
                placed.append((name, 0, out_bytes, step.final))
            operands["out"] = (name, 0, out_bytes)
            if hasattr(step, "dispatches"):
                _add_dispatches(composer, step, caps, operands, name)
                continue
            tunable = step.candidates(caps) if hasattr(step, "candidates") else None
            for role, nbytes in (tunable.scratch if tunable is not None else {}).items():
                buf, offset = composer.new_buffer(f"{name}_{role}", nbytes)
                operands[role] = (buf, offset, -(-int(nbytes) // 4) * 4)
            composer.add_library(step.launch(caps), operands, tunable)
            continue
        segment_plan, repeat = next(segment_plans)
        bound = [where[x] for x in step.inputs]
        for k, ranges in written_inputs(segment_plan.main, segment_plan.executables).items():
            # IREE updates this argument in place (index_put into a KV cache returns it). One IREE module
            # would have ordered every reader of the old bytes first; across segments and library ops a
            # later reader of them (the value, or another one IREE placed in the same bytes) would see
            # the new ones, so the segment then writes into a copy of its input instead.
            if not all(isinstance(x, int) for r in ranges for x in r):
                raise NotImplementedError(f"segment {index} writes its input {step.inputs[k]} at a "
                                          "symbolic range (static shapes only)")
            ranges = [(o, o + n) for o, n in ranges]
            buf, base = bound[k]
            victims = [node for b, s, e, node in placed if b == buf and last_read.get(node, -1) > index
                       and any(base + r0 < e and s < base + r1 for r0, r1 in ranges)]
            if victims:
                bound[k] = composer.add_copy(f"copy{index}_{k}", bound[k], _nbytes(value_of(step.inputs[k])))
                log.debug("segment %d writes its input %s in place: copied first (read later: %s)",
                          index, step.inputs[k], victims)
        locations = composer.add_segment(f"s{index}_" if repeat else "", segment_plan, bound, repeat)
        for node, loc in zip(step.outputs, locations, strict=True):
            # Outputs may share bytes with each other or with an input (IREE folds equal values into one
            # buffer): harmless, since nothing writes a placed value except the copies above protect.
            where[node] = loc
            placed.append((loc[0], loc[1], loc[1] + _nbytes(value_of(node)), node))
    output_locations = []
    for i, operand in enumerate(part.outputs):
        if operand is None:
            raise NotImplementedError(f"graph output {i} is not a tensor value of the graph")
        base = operand.base
        if (base.op == "placeholder" and placeholders.index(base) < n_user
                and operand.view.storage_offset() == 0
                and tuple(operand.view.shape) == tuple(value_of(base).shape)):
            output_locations.append(("input", placeholders.index(base)))
            continue
        buf, offset = where[base]
        itemsize = _nbytes(value_of(base)) // max(1, value_of(base).numel())
        output_locations.append((buf, offset + int(operand.view.storage_offset()) * itemsize,
                                 int(operand.view.numel()) * itemsize))
    plan = composer.plan(outputs, prepared.output_map, output_locations)
    plan.meta = {"target": target.key(), "dispatches": plan.dispatch_count,
                 "library": composer.library_entries,
                 "segments": sum(1 for s in part.steps if isinstance(s, Segment)),
                 "iree_segments": len(unique)}   # the distinct ones, compiled by IREE
    if packed:
        plan.meta["packed_constants"] = packed   # how quant weights were packed (bundle external weights)
    return plan, composer.dispatches_text()


def _add_dispatches(composer: Any, step: Any, caps: DeviceCaps, operands: dict, name: str) -> None:
    """The DISPATCH nodes of a library op of several (rows, reductions): its scratch roles become plan
    buffers `<name>_<role>`, and a dispatch's windows bind part of a role's range."""
    operands = dict(operands)
    for role, nbytes in step.scratch(caps).items():
        buf, offset = composer.new_buffer(f"{name}_{role}", nbytes)
        operands[role] = (buf, offset, -(-int(nbytes) // 4) * 4)
    for dispatch in step.dispatches(caps):
        bound = dict(operands)
        for role, (offset, nbytes) in (dispatch.windows or {}).items():
            if role in bound:
                buf, base, _ = bound[role]
                bound[role] = (buf, base + offset, nbytes)
        composer.add_library(dispatch.launch, bound, dispatch.tunable)


def _last_reads(part: Partition) -> dict[torch.fx.Node, int]:
    """The last step that reads each materialized value (graph outputs: after every step)."""
    last: dict[torch.fx.Node, int] = {}
    for index, step in enumerate(part.steps):
        bases = step.inputs if isinstance(step, Segment) else [o.base for o in step.operands()]
        for base in bases:
            last[base] = index
    for operand in part.outputs:
        if operand is not None:
            last[operand.base] = len(part.steps)
    return last
