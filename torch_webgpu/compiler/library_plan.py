"""The compiled path with library dispatches: matmuls (with their epilogues) run the kernel library's
WGSL, IREE compiles the segments between them, and one plan holds both.

`TORCH_WEBGPU_LIBRARY=0` compiles everything with IREE. Dynamic graphs (dynamic=True) always do.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch

from torch_webgpu.kernels.launch import DeviceCaps

from .fx_import import PreparedGraph, _bool_boundaries_as_int32
from .low_ir import Plan, TensorSpec
from .partition import Partition, Segment, partition, segment_graph, value_of


def library_enabled() -> bool:
    """False when TORCH_WEBGPU_LIBRARY=0 (everything through IREE)."""
    return os.environ.get("TORCH_WEBGPU_LIBRARY", "1") != "0"


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
    return DeviceCaps(features=frozenset(features), limits=limits, subgroup_size=target.subgroup_size)


def _static(example_inputs: list[Any]) -> bool:
    return all(isinstance(v, torch.Tensor) and all(isinstance(d, int) for d in v.shape)
               for v in example_inputs)


def plan_partition(prepared: PreparedGraph, example_inputs: list[Any], target: Any) -> Partition | None:
    """The partition of a prepared graph when the library applies to it, else None (all IREE)."""
    if not library_enabled() or not _static(example_inputs):
        return None
    return partition(prepared.graph_module, caps_for_target(target))


def _nbytes(val: torch.Tensor) -> int:
    from .lowering import device_dtype

    return int(val.numel()) * torch.empty((), dtype=getattr(torch, device_dtype(val.dtype))).element_size()


def compile_partitioned(prepared: PreparedGraph, part: Partition, inputs: list[TensorSpec],
                        outputs: list[TensorSpec], constants: dict[str, np.ndarray], target: Any,
                        compile_segments: Any) -> tuple[Plan, str]:
    """One plan from the partition: `compile_segments([(gm, name, output values)])` compiles the segment
    graphs (in one IREE invocation) to one Plan each. Returns the plan and the dispatches listing."""
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
    segment_plans = iter(compile_segments(segments) if segments else [])

    caps = caps_for_target(target)
    n_user = len(inputs)
    composer = PlanComposer(inputs, constants)
    graph = prepared.graph_module.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    where: dict[torch.fx.Node, tuple[str, int]] = {ph: (f"in{k}", 0) for k, ph in enumerate(placeholders)}
    variants: dict[str, str] = {}
    placed: list[tuple[str, int, int, torch.fx.Node]] = []
    for index, step in enumerate(part.steps):
        if not isinstance(step, Segment):
            launch = step.launch(caps)
            operands = {}
            for role, operand in step.roles().items():
                buf, offset = where[operand.base]
                operands[role] = (buf, offset, _nbytes(value_of(operand.base)))
            name = f"lib{index}"
            out_bytes = _nbytes(value_of(step.final))
            where[step.final] = composer.new_buffer(name, out_bytes)
            operands["out"] = (name, 0, out_bytes)
            key = composer.add_library(launch, operands)
            variants[key] = launch.name
            continue
        bound = [where[x] for x in step.inputs]
        locations = composer.add_segment("", next(segment_plans), bound)
        for node, loc in zip(step.outputs, locations, strict=True):
            if loc in bound and step.inputs[bound.index(loc)] is not node:
                # IREE updated an input in place (index_put into a KV cache returns the argument): the
                # value may have other readers across segments, which one IREE module would have seen.
                raise SegmentLayoutError(f"segment output {node} was written into its input "
                                         f"{step.inputs[bound.index(loc)]}")
            where[node] = loc
            placed.append((loc[0], loc[1], loc[1] + _nbytes(value_of(node)), node))
    _check_disjoint(placed)
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
    plan.meta = {"target": target.key(), "dispatches": plan.dispatch_count, "library": variants,
                 "segments": sum(1 for s in part.steps if isinstance(s, Segment))}
    return plan, composer.dispatches_text()


class SegmentLayoutError(RuntimeError):
    """IREE's segments wrote a value over another that must survive (an in-place index_put of a static
    KV cache); the caller compiles the graph without the library."""


def _check_disjoint(placed: list[tuple[str, int, int, Any]]) -> None:
    by_buffer: dict[str, list[tuple[int, int, Any]]] = {}
    for buf, start, end, node in placed:
        by_buffer.setdefault(buf, []).append((start, end, node))
    for buf, ranges in by_buffer.items():
        ranges.sort(key=lambda r: r[0])
        for (s0, e0, n0), (s1, e1, n1) in zip(ranges, ranges[1:], strict=False):
            if s1 < e0 and s1 < e1 and s0 < e0:
                raise SegmentLayoutError(f"segment outputs {n0} and {n1} overlap in {buf}")
