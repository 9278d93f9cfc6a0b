"""Sibling linears as one dispatch: matrix-vector library ops (decode: M <= GEMV_MAX_ROWS) that read the
same input with their own weights — attention's q/k/v projections, the MLP's gate/up — become one
grouped gemv (kernels/matmul.py `plan_grouped_matmul`, kernels/quant_matmul.py
`plan_grouped_quant_matmul`): one dispatch instead of two or three, the weights bound as they are (no
concatenated copy, so bundles still take them from the model by name).

The members' results share one plan buffer (each at a 256-byte aligned offset), so the grouped op has
several `finals`. A gate/up pair whose only use is the MLP's `act(gate) * up` runs in GLU form instead:
one result, the product (the multiplication's node is the op's final, the members' results are never
written). Members qualify when they have no bias or residual, read the same operand (base, view,
scale) in the same dtype, and their weights are graph inputs (always ready before the group runs, so the
members cannot depend on each other). `TORCH_WEBGPU_GROUPED_GEMV=0` turns grouping off.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import torch

from torch_webgpu.config import GROUPED_GEMV
from torch_webgpu.kernels import autotune
from torch_webgpu.kernels.launch import DeviceCaps, KernelLaunch
from torch_webgpu.kernels.matmul import (
    GEMV_MAX_ROWS,
    GROUPED_MAX,
    GroupedGemvProblem,
    grouped_variants,
    plan_grouped_matmul,
)
from torch_webgpu.kernels.quant_matmul import (
    GroupedQuantProblem,
    grouped_quant_variants,
    plan_grouped_quant_matmul,
)

from ..operands import Operand, Tunable, value_of
from .family import Family, FamilyOp, MatchContext
from .matmul import LibraryOp
from .quant import QuantLinearOp

ENV = GROUPED_GEMV.name
ALIGN = 256   # byte alignment of each member's result in the shared buffer (storage offset alignment)
_ITEMSIZE = {"f32": 4, "f16": 2}
_WEIGHT_ROLES = ("q", "scale", "zero")


def grouping_enabled() -> bool:
    """False when TORCH_WEBGPU_GROUPED_GEMV=0 (every linear its own dispatch)."""
    return GROUPED_GEMV.read()


@dataclass
class GroupedLinearOp:
    """Sibling linears (LibraryOp or QuantLinearOp, all one kind) of the same input as one dispatch."""

    members: list[Any]
    glu: torch.fx.Node | None = None   # GLU form: the act(gate) * up multiplication the op computes
    glu_activation: str | None = None   # the gate's activation when the graph spells it out (SiLU)
    glu_nodes: list[torch.fx.Node] = field(default_factory=list)   # ... and those nodes

    @property
    def quant(self) -> bool:
        """The members are quantized linears."""
        return isinstance(self.members[0], QuantLinearOp)

    @property
    def root(self) -> torch.fx.Node:
        """The first member's matmul."""
        return self.members[0].root

    @property
    def final(self) -> torch.fx.Node:
        """The first member's result (`finals` has every member's), or the GLU form's product."""
        return self.glu if self.glu is not None else self.members[0].final

    @property
    def finals(self) -> list[torch.fx.Node]:
        """Each member's result, in member order (written at `out_offsets`), or the GLU product."""
        return [self.glu] if self.glu is not None else [m.final for m in self.members]

    @property
    def absorbed(self) -> list[torch.fx.Node]:
        """Every node the members compute except the op's results."""
        finals = set(self.finals)
        nodes = [n for m in self.members for n in (m.root, *m.absorbed, m.final)] + self.glu_nodes
        return [n for n in dict.fromkeys(nodes) if n not in finals]

    def roles(self) -> dict[str, Operand]:
        """Every operand the op reads, by its binding role in the grouped launch."""
        roles: dict[str, Operand] = {"a": self.members[0].a}
        for i, m in enumerate(self.members):
            if self.quant:
                roles.update({f"{r}{i}": o for r, o in m.roles().items() if r in _WEIGHT_ROLES})
            else:
                roles[f"b{i}"] = m.b
        return roles

    def operands(self) -> list[Operand]:
        """Every operand the op reads."""
        return list(self.roles().values())

    def binding_bytes(self, role: str) -> int | None:
        """The bytes bound for a member's repacked constant (families/quant.py `repack`), else None."""
        if not self.quant or role == "a":
            return None
        name, index = role.rstrip("0123456789"), int(role[len(role.rstrip("0123456789")):])
        return self.members[index].binding_bytes(name)

    def out_offsets(self) -> tuple[list[int], int]:
        """The byte offset of each member's result in the shared output buffer, and its size."""
        offsets, at = [], 0
        for m in self.members[:1] if self.glu is not None else self.members:
            offsets.append(at)
            at += -(-m.m * m.n * _ITEMSIZE[m.dtype] // ALIGN) * ALIGN
        return offsets, at

    def problem(self) -> GroupedGemvProblem | GroupedQuantProblem:
        """The kernel library's grouped problem (each member's output at its offset)."""
        offsets, _ = self.out_offsets()
        problems = []
        if self.glu is not None:
            offsets = offsets * len(self.members)   # the second product is never stored
        for m, off in zip(self.members, offsets, strict=True):
            p = m.problem()
            p = replace(p, out=replace(p.out, offset=off // _ITEMSIZE[m.dtype]))
            if self.glu_activation and m is self.members[0]:
                p = replace(p, activation=self.glu_activation)
            problems.append(p)
        kind = GroupedQuantProblem if self.quant else GroupedGemvProblem
        return kind(tuple(problems), glu=self.glu is not None)

    def variants(self, caps: DeviceCaps) -> list[str]:
        """The grouped variants that run this op on `caps` (none: it cannot be grouped there)."""
        p = self.problem()
        return grouped_quant_variants(p, caps) if self.quant else grouped_variants(p, caps)

    def _plan(self, caps: DeviceCaps, variant: str | None = None) -> KernelLaunch:
        p = self.problem()
        return (plan_grouped_quant_matmul if self.quant else plan_grouped_matmul)(p, caps, variant)

    def launch(self, caps: DeviceCaps) -> KernelLaunch:
        """The library's launch of this op on `caps` (its default variant there)."""
        return self._plan(caps)

    def candidates(self, caps: DeviceCaps) -> Tunable:
        """The variants the machine that runs the plan times once (the default first)."""
        p = self.problem()
        names = self.variants(caps)[:autotune.MAX_CANDIDATES]
        kind = "grouped_quant_matmul" if self.quant else "grouped_matmul"
        return Tunable.of(kind, p, [self._plan(caps, v) for v in names])


def _same_input_key(op: Any) -> tuple | None:
    """What siblings must share to be grouped with `op` (None: `op` cannot be grouped)."""
    quant = type(op) is QuantLinearOp
    if not (quant or type(op) is LibraryOp) or op.batch != 1 or op.m > GEMV_MAX_ROWS:
        return None
    if op.bias is not None or op.residual is not None:
        return None
    weights = [o for r, o in op.roles().items() if r != "a"]
    if not all(o.base.op == "placeholder" for o in weights):
        return None   # computed weights could depend on a sibling: not grouped
    v = op.a.view
    key = (quant, op.a.base, tuple(v.shape), tuple(v.stride()), int(v.storage_offset()), op.a.scale,
           op.dtype, op.m, op.k)
    if quant:
        p = op.problem()
        key += (p.weight, p.activation_dtype)
    return key


def _decomposed_silu(node: torch.fx.Node) -> list[torch.fx.Node] | None:
    """The nodes of the `mul(x, sigmoid(x))` that SiLU decomposes to (x: `node`, or its widening to f32
    and then the narrowing back, as f16 graphs compute it), when they are all `node` feeds; the last one
    is the activated value. Else None."""
    aten, convert = torch.ops.aten, torch.ops.prims.convert_element_type.default
    x, nodes = node, []
    if len(x.users) == 1 and next(iter(x.users)).target is convert:
        x = next(iter(x.users))
        nodes.append(x)
    users = list(x.users)
    sig = [u for u in users if u.target is aten.sigmoid.default]
    if len(users) != 2 or len(sig) != 1 or len(sig[0].users) != 1:
        return None
    (mul,) = sig[0].users
    if mul.target is not aten.mul.Tensor or mul.kwargs or set(mul.args) != {x, sig[0]} or mul not in users:
        return None
    nodes += [sig[0], mul]
    if nodes[0] is not sig[0]:   # widened: the product narrows back to the gate's dtype
        if len(mul.users) != 1 or next(iter(mul.users)).target is not convert:
            return None
        nodes.append(next(iter(mul.users)))
        if value_of(nodes[-1]).dtype != value_of(node).dtype:
            return None
    return nodes


def _as_glu(group: GroupedLinearOp, graph_outputs: set, taken: set) -> GroupedLinearOp | None:
    """`group` in GLU form when it is a gate (SiLU or another activation in its epilogue, or followed by
    SiLU's `x * sigmoid(x)`) and an up projection whose results only feed one `gate * up` of their
    shape and dtype; else None."""
    if len(group.members) != 2:
        return None
    silu = {id(m): _decomposed_silu(m.final) if m.activation is None else None for m in group.members}
    gate, up = sorted(group.members, key=lambda m: m.activation is None and silu[id(m)] is None)
    gated = silu[id(gate)][-1] if silu[id(gate)] else gate.final   # the activated gate
    if up.activation is not None or silu[id(up)] is not None or gate.n != up.n:
        return None
    if gate.activation is None and silu[id(gate)] is None:
        return None
    ends = (gated, up.final)
    if any(f in graph_outputs or len(f.users) != 1 for f in ends) or gate.final in graph_outputs:
        return None
    extra = silu[id(gate)] or []   # the decomposed SiLU's nodes
    if set(extra) & taken:
        return None   # another library op computes part of the SiLU
    (mul,) = gated.users
    if (mul not in up.final.users or mul.target is not torch.ops.aten.mul.Tensor or mul.kwargs
            or set(mul.args) != set(ends) or mul in taken):
        return None
    vals = [value_of(x) for x in (mul, gate.final, up.final)]
    if not all(isinstance(v, torch.Tensor) and v.shape == vals[0].shape and v.dtype == vals[0].dtype
               and v.is_contiguous() for v in vals):
        return None
    return GroupedLinearOp([gate, up], mul, "silu" if extra else None, extra)


def group_siblings(ops: list, caps: DeviceCaps, graph_outputs: set | None = None,
                   taken: set | None = None) -> list:
    """`ops` with siblings of the same input (up to GROUPED_MAX, fewer where the device's bindings do
    not allow it) replaced by one GroupedLinearOp at the first member's place (in GLU form where
    `_as_glu` finds the MLP's product; `graph_outputs`, `taken`: the partition's)."""
    by_key: dict[tuple, list[int]] = {}
    for i, op in enumerate(ops):
        key = _same_input_key(op)
        if key is not None:
            by_key.setdefault(key, []).append(i)
    replaced: dict[int, Any] = {}
    dropped: set[int] = set()
    for indices in by_key.values():
        rest = list(indices)
        while len(rest) >= 2:
            for size in range(min(GROUPED_MAX, len(rest)), 1, -1):
                group = GroupedLinearOp([ops[i] for i in rest[:size]])
                glu = _as_glu(group, graph_outputs or set(), taken or set())
                if glu is not None and glu.variants(caps):
                    group = glu
                if group.variants(caps):
                    replaced[rest[0]] = group
                    dropped.update(rest[1:size])
                    rest = rest[size:]
                    break
            else:
                rest = rest[1:]
    return [replaced.get(i, op) for i, op in enumerate(ops) if i not in dropped]


def combine_siblings(ops: list[FamilyOp], context: MatchContext) -> list[FamilyOp]:
    """`ops` with sibling linears grouped (`group_siblings`) unless TORCH_WEBGPU_GROUPED_GEMV=0."""
    if not grouping_enabled():
        return ops
    return group_siblings(ops, context.caps, context.graph_outputs, context.taken)


# built from the ops other families found, never from a node of its own
FAMILY = Family("grouped", frozenset(), combine=combine_siblings)

__all__ = ["ENV", "FAMILY", "GroupedLinearOp", "group_siblings", "grouping_enabled"]
