"""Splits a prepared, static-shape aten graph at the ops the kernel library runs: the driver of the
compiler families (families/: matmul, quantized linear, convolution, attention, rows, reductions,
grouped sibling linears), which it asks node by node through their registry.

The result is a schedule: IREE segments (FX subgraphs) and library ops (each family's op), in an order
that respects every dependency (segment i runs before library op i, which runs before segment i + 1).
Views (`view`, `permute`, `t`, `expand`, ...) cost nothing: a library operand reached through views is
bound with the view's strides, a graph output that is a contiguous view of a buffer is read from it, and
a segment that needs a view recomputes it from its materialized base.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from torch_webgpu.kernels.launch import DeviceCaps

from .families import REGISTRY, families_at
from .families.family import FamilyOp, MatchContext
from .operands import Operand, Resolver


@dataclass
class Segment:
    """IREE's part: FX nodes (in graph order) with the materialized values they read and produce."""

    nodes: list[torch.fx.Node] = field(default_factory=list)
    inputs: list[torch.fx.Node] = field(default_factory=list)
    outputs: list[torch.fx.Node] = field(default_factory=list)


@dataclass
class Partition:
    """`steps` alternates Segment and library ops in execution order; `outputs[i]` reads graph output i
    from (materialized node, meta view of it)."""

    steps: list[Segment | FamilyOp]
    outputs: list[Operand | None]      # None: an output that is not a node (a Python value)
    forced: set[torch.fx.Node] = field(default_factory=set)   # views IREE materializes

    @property
    def library_ops(self) -> list[FamilyOp]:
        """The library ops in order."""
        return [s for s in self.steps if not isinstance(s, Segment)]


def partition(gm: torch.fx.GraphModule, caps: DeviceCaps) -> Partition | None:
    """The schedule of segments and library ops of a prepared static graph for a device with `caps`, or
    None if no op in it goes to the library."""
    for family in REGISTRY:
        if family.prepare is not None:
            family.prepare(gm)
    graph = gm.graph
    forced: set[torch.fx.Node] = set()
    resolver = Resolver(forced)
    context = MatchContext(graph, caps, resolver)
    ops: list[FamilyOp] = []
    for node in graph.nodes:
        if node.op != "call_function" or node in context.taken:
            continue
        for family in families_at(node.target):
            op = family.match(node, context)
            if op is not None:
                ops.append(op)
                context.taken.update([op.root, op.final, *op.absorbed])
                forced.add(op.final)   # a view absorbed last is the library op's own result
                break
    if not ops:
        return None
    for family in REGISTRY:
        if family.combine is not None:
            ops = family.combine(ops, context)
    output = next(n for n in graph.nodes if n.op == "output")
    results = output.args[0]
    results = list(results) if isinstance(results, (tuple, list)) else [results]
    outputs: list[Operand | None] = []
    for r in results:
        if not isinstance(r, torch.fx.Node):
            outputs.append(None)
            continue
        operand = resolver.resolve(r)
        ok = operand is not None and operand.view.is_contiguous() and (
            operand.view.storage_offset() * operand.view.element_size()) % 4 == 0
        if not ok and resolver.is_alias(r):
            forced.add(r)   # a strided view returned: IREE materializes it
            operand = resolver.resolve(r)
        outputs.append(operand)
    return Partition(_schedule(graph, ops, resolver), outputs, forced)


def _schedule(graph: torch.fx.Graph, ops: list, resolver: Resolver) -> list:
    """Segments placed as early as their inputs allow (segment i before library op i)."""
    lib_of_final = {f: i for i, op in enumerate(ops) for f in getattr(op, "finals", [op.final])}
    in_library = {n for op in ops for n in (op.root, *op.absorbed)}
    level: dict[torch.fx.Node, int] = {}   # segment index of each IREE node
    materialized_level: dict[torch.fx.Node, int] = {}   # earliest segment that may read a value

    def ready(node: torch.fx.Node) -> int:
        if node.op == "placeholder":
            return 0
        if node in lib_of_final:
            return lib_of_final[node] + 1
        if resolver.is_alias(node):
            return ready(node.args[0])
        return materialized_level[node]

    segments = [Segment() for _ in range(len(ops) + 1)]
    for node in graph.nodes:
        if node.op != "call_function" or node in in_library or node in lib_of_final:
            continue
        if resolver.is_alias(node):
            continue   # recomputed inside each segment that reads it
        s = max([ready(x) for x in node.all_input_nodes] or [0])
        if node.target is operator.getitem:
            s = materialized_level[node.args[0]]
        level[node] = materialized_level[node] = s
        segments[s].nodes.append(node)
    for op_index, op in enumerate(ops):
        for operand in op.operands():
            base = operand.base
            if base in level and level[base] > op_index:
                raise AssertionError(f"library op {op.root} reads {base} of a later segment")
    # Inputs and outputs of each segment.
    output_node = next(n for n in graph.nodes if n.op == "output")
    needed_outside: set[torch.fx.Node] = {o.base for op in ops for o in op.operands()}
    for r in output_node.all_input_nodes:
        operand = resolver.resolve(r)
        if operand is not None:
            needed_outside.add(operand.base)
    for i, seg in enumerate(segments):
        members = set(seg.nodes)
        for node in seg.nodes:
            for x in _materialized_inputs(node, resolver):
                if x not in members and x not in seg.inputs:
                    seg.inputs.append(x)
                if x in level and level[x] != i:
                    needed_outside.add(x)
    for seg in segments:
        seg.outputs = [n for n in seg.nodes if n in needed_outside]
    steps: list[Any] = []
    for i, op in enumerate(ops):
        if segments[i].outputs:
            steps.append(segments[i])
        steps.append(op)
    if segments[-1].outputs:
        steps.append(segments[-1])
    return steps


def _materialized_inputs(node: torch.fx.Node, resolver: Resolver) -> list[torch.fx.Node]:
    """The materialized values `node` reads (through the view chains a segment recomputes)."""
    result = []
    for x in node.all_input_nodes:
        while resolver.is_alias(x):
            x = x.args[0]
        if x not in result:
            result.append(x)
    return result


def segment_graph(seg: Segment, forced: set[torch.fx.Node]) -> torch.fx.GraphModule:
    """A standalone FX graph of `seg`: placeholders for its inputs, its nodes (with the view chains
    they read), its outputs as a tuple."""
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for k, x in enumerate(seg.inputs):
        ph = graph.placeholder(f"seg_in_{k}")
        ph.meta = dict(x.meta)
        env[x] = ph
    resolver = Resolver(forced)

    def copy(node: torch.fx.Node) -> torch.fx.Node:
        if node in env:
            return env[node]
        for x in node.all_input_nodes:
            if x not in env and resolver.is_alias(x):
                copy(x)
        env[node] = graph.node_copy(node, lambda x: env[x])
        return env[node]

    for node in seg.nodes:
        for x in node.all_input_nodes:
            if x not in env:
                copy(x)
        copy(node)
    graph.output(tuple(env[o] for o in seg.outputs))
    return torch.fx.GraphModule(torch.nn.Module(), graph)
