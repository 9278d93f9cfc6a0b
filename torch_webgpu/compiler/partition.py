"""Splits a prepared, static-shape aten graph at the ops the kernel library runs (matmul family here,
convolution in conv_family.py, attention in attention_family.py).

The result is a schedule: IREE segments (FX subgraphs) and library ops (`LibraryOp`, `ConvOp`,
`AttentionOp`), in an order that respects every dependency (segment i runs before library op i, which
runs before segment i + 1).
Views (`view`, `permute`, `t`, `expand`, ...) cost nothing: a library operand reached through views is
bound with the view's strides, a graph output that is a contiguous view of a buffer is read from it, and
a segment that needs a view recomputes it from its materialized base. Elementwise epilogues that only
the matmul result feeds (scale, bias, activation, residual add) are absorbed into the library op.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from torch_webgpu.kernels import autotune
from torch_webgpu.kernels.launch import DeviceCaps, KernelLaunch
from torch_webgpu.kernels.matmul import Layout, MatmulProblem, plan_matmul, plan_matmul_steps, variants

from .families.attention import AttentionMatcher, AttentionOp
from .families.conv import CONVOLUTIONS, ConvMatcher, ConvOp, fold_channel_affine
from .families.reduce import REDUCTIONS, ReduceMatcher
from .families.rows import ROW_ROOTS, RowsMatcher
from .operands import Operand, Resolver, Tunable, add_operand, broadcast_operand, scalar, value_of

aten = torch.ops.aten
MATMULS = frozenset({aten.mm.default, aten.bmm.default})
_ACTIVATIONS = {aten.relu.default: "relu", aten.silu.default: "silu", aten.sigmoid.default: "sigmoid",
                aten.tanh.default: "tanh"}
_LIBRARY_DTYPES = {torch.float32: "f32", torch.float16: "f16"}
_CONVERT = torch.ops.prims.convert_element_type.default


def _widened_f16(node: Any) -> torch.fx.Node | None:
    """The float16 value that `node` casts to float32, else None. torch's decompositions compute an f16
    linear (addmm) in f32 between casts; the library runs it as an f16 matmul (f32 accumulation), which is
    the same arithmetic, with f16 storage (and tensor cores where the device has them)."""
    if not (isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target is _CONVERT):
        return None
    src, val = node.args[0], value_of(node)
    if not (isinstance(src, torch.fx.Node) and isinstance(val, torch.Tensor) and val.dtype == torch.float32
            and isinstance(value_of(src), torch.Tensor) and value_of(src).dtype == torch.float16):
        return None
    return src


def _narrows_to_f16(node: torch.fx.Node, cur: torch.fx.Node) -> bool:
    """`node` casts the float32 `cur` to float16."""
    val = value_of(node)
    return (node.op == "call_function" and node.target is _CONVERT and node.args[0] is cur
            and isinstance(val, torch.Tensor) and val.dtype == torch.float16)


@dataclass
class LibraryOp:
    """One library dispatch: a matmul and its absorbed epilogue; `final`: the node whose value it writes.
    (Other families — convolution, attention — provide the same `roles`, `launch`, `root`, `final`,
    `absorbed`.)"""

    root: torch.fx.Node
    final: torch.fx.Node
    absorbed: list[torch.fx.Node]
    batch: int
    m: int
    n: int
    k: int
    dtype: str
    a: Operand
    b: Operand
    bias: Operand | None = None
    residual: Operand | None = None
    activation: str | None = None
    alpha: float = 1.0
    beta: float = 1.0

    def roles(self) -> dict[str, Operand]:
        """Every operand the op reads, by its binding role in the library's launch."""
        roles = {"a": self.a, "b": self.b, "bias": self.bias, "residual": self.residual}
        return {role: o for role, o in roles.items() if o is not None}

    def operands(self) -> list[Operand]:
        """Every operand the op reads."""
        return list(self.roles().values())

    def problem(self) -> MatmulProblem:
        """The library problem this op solves."""
        shape_a, shape_b, shape_o = (self.batch, self.m, self.k), (self.batch, self.k, self.n), (
            self.batch, self.m, self.n)
        return MatmulProblem(
            batch=self.batch, m=self.m, n=self.n, k=self.k, a=self.a.layout(shape_a),
            b=self.b.layout(shape_b), out=Layout(0, self.m * self.n, self.n, 1), dtype=self.dtype,
            bias=self.bias.layout(shape_o) if self.bias else None,
            residual=self.residual.layout(shape_o) if self.residual else None,
            activation=self.activation, alpha=self.alpha, beta=self.beta)

    def launch(self, caps: DeviceCaps) -> KernelLaunch:
        """The library's launch of this op on `caps` (its default variant there)."""
        return plan_matmul(self.problem(), caps)

    def candidates(self, caps: DeviceCaps) -> Tunable:
        """The variants the machine that runs the plan times once (the default first)."""
        p = self.problem()
        plans = [plan_matmul_steps(p, caps, v) for v in variants(p, caps)[:autotune.MAX_CANDIDATES]]
        scratch: dict[str, int] = {}
        for plan in plans:   # split-K variants: partial sums between their two dispatches
            scratch.update({r: max(n, scratch.get(r, 0)) for r, n in plan.scratch.items()})
        return Tunable(autotune.problem_key("matmul", p), p.flops, [plan.steps[0] for plan in plans],
                       [plan.steps[1:] for plan in plans], scratch)


@dataclass
class Segment:
    """IREE's part: FX nodes (in graph order) with the materialized values they read and produce."""

    nodes: list[torch.fx.Node] = field(default_factory=list)
    inputs: list[torch.fx.Node] = field(default_factory=list)
    outputs: list[torch.fx.Node] = field(default_factory=list)


@dataclass
class Partition:
    """`steps` alternates Segment and LibraryOp in execution order; `outputs[i]` reads graph output i
    from (materialized node, meta view of it)."""

    steps: list[Segment | LibraryOp | ConvOp | AttentionOp]
    outputs: list[Operand | None]      # None: an output that is not a node (a Python value)
    forced: set[torch.fx.Node] = field(default_factory=set)   # views IREE materializes

    @property
    def library_ops(self) -> list[LibraryOp]:
        """The library ops in order."""
        return [s for s in self.steps if not isinstance(s, Segment)]


class _Matcher:
    def __init__(self, graph: torch.fx.Graph, resolver: Resolver, caps: DeviceCaps):
        self.order = {n: i for i, n in enumerate(graph.nodes)}
        self.resolver = resolver
        self.caps = caps
        self.shader_f16 = caps.shader_f16
        output = next(n for n in graph.nodes if n.op == "output")
        self.graph_outputs = set(output.all_input_nodes)

    def _precedes(self, operand: Operand, root: torch.fx.Node) -> bool:
        return self.order[operand.base] < self.order[root]

    def _f16_operand(self, node: torch.fx.Node) -> Operand | None:
        """The f32 operand `node` (a cast of an f16 value, or views of one) read as that f16 value."""
        src = _widened_f16(node)
        if src is not None:
            return self.resolver.resolve(src)   # the cast commutes with the views below it
        operand = self.resolver.resolve(node, scalable=True)
        src = _widened_f16(operand.base) if operand is not None else None
        inner = self.resolver.resolve(src) if src is not None else None
        if inner is None or not (inner.view.is_contiguous() and inner.view.storage_offset() == 0
                                 and inner.view.numel() == value_of(inner.base).numel()):
            return None
        return Operand(inner.base, operand.view, operand.scale)

    def match(self, root: torch.fx.Node) -> LibraryOp | None:
        """The library op rooted at the matmul `root`, or None (IREE computes it)."""
        val = value_of(root)
        if (isinstance(val, torch.Tensor) and val.dtype == torch.float32 and self.shader_f16
                and all(isinstance(value_of(x), torch.Tensor) for x in root.args[:2])):
            a, b = self._f16_operand(root.args[0]), self._f16_operand(root.args[1])
            if a is not None and b is not None:
                op = self._match(root, a, b, "f16")
                if op is not None and value_of(op.final).dtype == torch.float16:
                    return op
        return self._match(root, None, None, None)

    def _match(self, root: torch.fx.Node, a: Operand | None, b: Operand | None,
               dtype: str | None) -> LibraryOp | None:
        """`dtype` "f16" with `a`, `b`: the f32 matmul of widened f16 operands, stored back as f16."""
        a_node, b_node = root.args[:2]
        val, a_val, b_val = value_of(root), value_of(a_node), value_of(b_node)
        if not all(isinstance(v, torch.Tensor) for v in (val, a_val, b_val)):
            return None
        if dtype is None:
            dtype = _LIBRARY_DTYPES.get(val.dtype)
            if dtype is None or a_val.dtype != val.dtype or b_val.dtype != val.dtype or (
                    dtype == "f16" and not self.shader_f16) or val.numel() == 0:
                return None
            a, b = self.resolver.resolve(a_node, scalable=True), self.resolver.resolve(b_node, scalable=True)
        if a is None or b is None or val.numel() == 0:
            return None
        if root.target is aten.mm.default:
            batch, (m, k), n = 1, a_val.shape, b_val.shape[1]
        else:
            (batch, m, k), n = a_val.shape, b_val.shape[2]
        op = LibraryOp(root, root, [], int(batch), int(m), int(n), int(k), dtype, a, b,
                       alpha=a.scale * b.scale)
        try:
            op.a.layout((op.batch, op.m, op.k))
            op.b.layout((op.batch, op.k, op.n))
        except ValueError:
            return None
        self._epilogue(op)
        if self._widened(op) and value_of(op.final).dtype != torch.float16:
            return None   # the f32 result is used as such: an f32 library op instead
        try:
            launch = op.launch(self.caps)
        except (ValueError, TypeError):
            return None   # no variant for this problem on the target (IREE compiles it)
        if max(launch.grid) > self.caps.limit("max-compute-workgroups-per-dimension", 65535):
            return None
        return op

    @staticmethod
    def _widened(op: LibraryOp) -> bool:
        """An f16 op over an f32 matmul of widened operands (its epilogue operands are widened too)."""
        return op.dtype == "f16" and value_of(op.root).dtype == torch.float32

    def _epilogue_operand(self, op: LibraryOp, other: torch.fx.Node, cur: torch.fx.Node,
                          widened: bool = False) -> Operand | None:
        """`other` as an epilogue operand broadcast to `cur`'s shape, or None when it cannot be one
        (`widened`: `other` must be a widened f16 value, which the library reads)."""
        ov, cv = value_of(other), value_of(cur)
        if not isinstance(ov, torch.Tensor) or ov.dtype != cv.dtype:
            return None
        if widened:
            other = _widened_f16(other)   # read as the f16 value it widens
            if other is None:
                return None
        expanded = broadcast_operand(self.resolver, other, cur, lambda o: self._precedes(o, op.root),
                                     same_dtype=False)
        if expanded is None:
            return None
        try:
            expanded.layout((op.batch, op.m, op.n))
        except ValueError:
            return None
        return expanded

    def _epilogue(self, op: LibraryOp) -> None:
        cur = op.root
        widened = self._widened(op)   # still in the f32 part of a widened f16 matmul
        while len(cur.users) == 1 and cur not in self.graph_outputs:
            (user,) = cur.users
            if widened and _narrows_to_f16(user, cur):
                # The library stores f16; the epilogue goes on in f16 (each step in f32 registers, its
                # f16 rounding skipped: the same result or a closer one).
                widened = False
                if cur is not op.root:
                    op.absorbed.append(cur)
                cur = op.final = user
                continue
            if user.op != "call_function" or (user.args[0] is not cur and user.target is not aten.add.Tensor):
                return
            val = value_of(user)
            if not isinstance(val, torch.Tensor) or val.dtype != value_of(cur).dtype:
                return
            target = user.target
            if target in (aten.view.default, aten._unsafe_view.default) and val.is_contiguous():
                pass
            elif target in (aten.mul.Tensor, aten.mul.Scalar, aten.div.Tensor, aten.div.Scalar) and (
                    scalar(user.args[1]) is not None and not (op.bias or op.activation or op.residual)
                    and len(user.args) == 2 and not user.kwargs):
                c = scalar(user.args[1])
                if target in (aten.div.Tensor, aten.div.Scalar):
                    if c == 0:
                        return
                    c = 1.0 / c
                op.alpha *= c
            elif target in _ACTIVATIONS or target is aten.gelu.default:
                if op.activation or op.residual or len(user.args) != 1:
                    return
                approximate = user.kwargs.get("approximate", "none")
                op.activation = _ACTIVATIONS.get(target) or ("gelu" if approximate == "none" else "gelu_tanh")
            elif (other := add_operand(user, cur)) is not None:
                if not (op.bias or op.activation):
                    beta = 1.0
                    scaled = other
                    if (other.op == "call_function" and other.target in (aten.mul.Tensor, aten.mul.Scalar)
                            and len(other.users) == 1 and len(other.args) == 2
                            and scalar(other.args[1]) is not None
                            and isinstance(other.args[0], torch.fx.Node)):
                        beta, scaled = scalar(other.args[1]), other.args[0]
                    operand = self._epilogue_operand(op, scaled, cur, widened)
                    if operand is None:
                        return
                    op.bias, op.beta = operand, beta
                    if scaled is not other:
                        op.absorbed.append(other)
                elif not op.residual:
                    operand = self._epilogue_operand(op, other, cur, widened)
                    if operand is None:
                        return
                    op.residual = operand
                else:
                    return
            else:
                return
            if cur is not op.root:
                op.absorbed.append(cur)
            cur = op.final = user


def partition(gm: torch.fx.GraphModule, caps: DeviceCaps) -> Partition | None:
    """The schedule of segments and library ops of a prepared static graph for a device with `caps`, or
    None if no op in it goes to the library."""
    # families built on this module (import cycle)
    from .families.quant import match_quant_embedding, match_quant_linear

    graph = gm.graph
    if any(n.op == "call_function" and n.target in CONVOLUTIONS for n in graph.nodes):
        fold_channel_affine(graph)
        gm.recompile()
    forced: set[torch.fx.Node] = set()
    resolver = Resolver(forced)
    matcher = _Matcher(graph, resolver, caps)
    conv_matcher = ConvMatcher(matcher.order, matcher.graph_outputs, resolver, caps)
    attention_matcher = AttentionMatcher(matcher.order, matcher.graph_outputs, resolver, caps)
    ops: list[LibraryOp | ConvOp | AttentionOp] = []
    taken: set[torch.fx.Node] = set()
    # The bandwidth families (rows_family.py: softmax / log_softmax / layer_norm / rms_norm; then
    # reduce_family.py: sum / mean / amax / amin), tried after the matmul-rooted ones at their first node.
    rows_matcher = RowsMatcher(matcher.order, matcher.graph_outputs, resolver, caps, taken)
    reduce_matcher = ReduceMatcher(matcher.order, resolver, caps)
    bandwidth = [(ROW_ROOTS, rows_matcher.match), (REDUCTIONS, reduce_matcher.match)]
    for node in graph.nodes:
        if node.op != "call_function" or node in taken:
            continue
        op = None
        if node.target in MATMULS:
            op = attention_matcher.match(node) or match_quant_linear(node, matcher) or matcher.match(node)
        elif node.target in CONVOLUTIONS:
            op = conv_matcher.match(node)
        elif node.target is aten.embedding.default:
            op = match_quant_embedding(node, matcher)   # a torchao-quantized table (float ones go to IREE)
        else:
            for roots, match in bandwidth:
                op = match(node) if node.target in roots else None
                if op is not None:
                    break
        if op is not None:
            ops.append(op)
            taken.update([op.root, op.final, *op.absorbed])
            forced.add(op.final)   # a view absorbed last is the library op's own result
    if not ops:
        return None
    from .families.grouped import group_siblings, grouping_enabled  # built on this module (import cycle)

    if grouping_enabled():
        ops = group_siblings(ops, caps, matcher.graph_outputs, taken)   # sibling linears: one dispatch
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
