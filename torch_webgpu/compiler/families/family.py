"""What every compiler family is (`Family`), what the ops it makes offer (`FamilyOp`) and what its matcher
reads while one graph is partitioned (`MatchContext`).

A family turns a pattern of aten nodes that starts at one of its `roots` into one library op (a kernel
launch, or a few, with the operands it reads by role); partition.py walks the graph in order and asks
the families registered for each node's target (families/__init__.py, `REGISTRY`), in registry order;
the first op found wins, a node no family takes stays in an IREE segment.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import torch
import torch.fx

from torch_webgpu.kernels.launch import DeviceCaps, KernelLaunch

from ..operands import Operand, Resolver

M = TypeVar("M")


class FamilyOp(Protocol):
    """A library op as the driver and plan composition use it: the node it starts at (`root`), the node
    whose value it writes (`final`), the nodes between that it computes (`absorbed`), its operands by
    binding role and its default launch. Ops of several dispatches add `dispatches(caps)` and
    `scratch(caps)`; tunable ones `candidates(caps)`."""

    root: torch.fx.Node
    final: torch.fx.Node
    absorbed: list[torch.fx.Node]

    def roles(self) -> dict[str, Operand]: ...

    def operands(self) -> list[Operand]: ...

    def launch(self, caps: DeviceCaps) -> KernelLaunch: ...


@dataclass
class MatchContext:
    """The partition of one graph as the families' matchers see it: the device, the operand resolver
    (and through it the views that must be materialized), graph order, the graph's outputs and the nodes
    library ops already took."""

    graph: torch.fx.Graph
    caps: DeviceCaps
    resolver: Resolver
    order: dict[torch.fx.Node, int] = field(init=False)
    graph_outputs: set[torch.fx.Node] = field(init=False)
    taken: set[torch.fx.Node] = field(default_factory=set)
    _matchers: dict[Any, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.order = {n: i for i, n in enumerate(self.graph.nodes)}
        output = next(n for n in self.graph.nodes if n.op == "output")
        self.graph_outputs = set(output.all_input_nodes)

    def matcher(self, make: Callable[[MatchContext], M]) -> M:
        """The one matcher `make` builds for this graph (matchers keep per-graph state, and one family's
        matcher may serve another: the quantized linear uses the matmul epilogue)."""
        if make not in self._matchers:
            self._matchers[make] = make(self)
        return self._matchers[make]


@dataclass(frozen=True)
class Family:
    """One compiler family: `match(node, context)` is the library op that starts at `node` (a node whose
    target is one of `roots`), or None (IREE computes it). `prepare(gm)` rewrites the graph into the
    form the family matches before any matching; `combine(ops, context)` rewrites the ops all families
    found (grouped sibling linears), after matching. A family with no roots only combines."""

    name: str
    roots: frozenset[Any]
    match: Callable[[torch.fx.Node, MatchContext], FamilyOp | None] | None = None
    prepare: Callable[[torch.fx.GraphModule], None] | None = None
    combine: Callable[[list[FamilyOp], MatchContext], list[FamilyOp]] | None = None
