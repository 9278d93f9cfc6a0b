"""The matmul family: `mm` / `bmm` with the elementwise epilogue that only its result feeds (scale, bias,
activation, residual add) as one kernel-library dispatch (kernels/matmul.py), in f32, in f16, and as an
f16 matmul where torch's decompositions compute an f16 linear in f32 between casts.

Operands are read through their views (`operands.Resolver`): a transposed weight or a head-split
activation is bound with the view's strides, never copied. The quantized linear (quant.py) is a
LibraryOp too, matched with this family's epilogue.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

from torch_webgpu.kernels import autotune
from torch_webgpu.kernels.launch import DeviceCaps, KernelLaunch
from torch_webgpu.kernels.matmul import Layout, MatmulProblem, plan_matmul, plan_matmul_steps, variants

from ..operands import Operand, Resolver, Tunable, add_operand, broadcast_operand, scalar, value_of
from .family import Family, MatchContext

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
        return Tunable.of("matmul", p, [plan.steps[0] for plan in plans], [plan.steps[1:] for plan in plans],
                          scratch)


class MatmulMatcher:
    """Matches a matmul and its epilogue from the `mm` / `bmm` node (see the module doc)."""

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


def matmul_matcher(context: MatchContext) -> MatmulMatcher:
    """The graph's matmul matcher (the quantized linear extends its epilogue)."""
    return MatmulMatcher(context.graph, context.resolver, context.caps)


def match_matmul(node: torch.fx.Node, context: MatchContext) -> LibraryOp | None:
    """The library matmul rooted at `node`, or None."""
    return context.matcher(matmul_matcher).match(node)


FAMILY = Family("matmul", MATMULS, match_matmul)
