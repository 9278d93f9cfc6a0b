"""Operands of library ops (a value read through a chain of views from its materialized base node) and
the variants a library op carries for load-time autotuning.

The vocabulary every compiler family (families/) and the partition driver (partition.py) share.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.fx

from torch_webgpu.kernels import autotune
from torch_webgpu.kernels.launch import KernelLaunch
from torch_webgpu.kernels.matmul import Layout

aten = torch.ops.aten
# Ops whose result is a view of their first operand (no computation): replayed on meta tensors.
ALIASES = frozenset({
    aten.view.default, aten._unsafe_view.default, aten.permute.default, aten.t.default,
    aten.transpose.int, aten.expand.default, aten.unsqueeze.default, aten.squeeze.dim,
    aten.squeeze.dims, aten.squeeze.default, aten.slice.Tensor, aten.select.int, aten.alias.default,
    aten.clone.default,   # same values: a library operand reads the source through its strides
})
SCALES = frozenset({aten.mul.Tensor, aten.mul.Scalar})


def value_of(node: Any) -> Any:
    """The example value of a node: its fake tensor, or a meta tensor of a lifted constant's metadata."""
    if not isinstance(node, torch.fx.Node):
        return None
    val = node.meta.get("val")
    meta = node.meta.get("tensor_meta")
    if val is None and meta is not None and hasattr(meta, "shape"):
        val = torch.empty(tuple(meta.shape), dtype=meta.dtype, device="meta")
    return val


@dataclass
class Operand:
    """A library operand: a materialized node and the strided view of it the op reads."""

    base: torch.fx.Node
    view: torch.Tensor          # a meta tensor over the base's contiguous storage (shape, strides, offset)
    scale: float = 1.0          # the op reads scale * view (scalar multiplications skipped on the way)

    def layout(self, shape: tuple[int, ...]) -> Layout:
        """The (batch, row, col) layout of the view reshaped to the 3-D `shape` (ValueError if it cannot)."""
        try:
            v = self.view.view(*shape)
        except RuntimeError as exc:
            raise ValueError(f"operand view {tuple(self.view.shape)} is not a strided {shape}") from exc
        return Layout(int(v.storage_offset()), *(int(s) for s in v.stride()))


def _replay_alias(node: torch.fx.Node, source: torch.Tensor) -> torch.Tensor:
    if node.target is aten.clone.default:
        return source
    args = [source, *node.args[1:]]
    return node.target(*args, **node.kwargs)


class Resolver:
    """Resolves values through view chains down to materialized nodes (on meta tensors)."""

    def __init__(self, forced: set[torch.fx.Node]):
        self.forced = forced   # alias nodes that are materialized (by IREE, or as a library op's result)

    def is_alias(self, node: Any) -> bool:
        return (isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target in ALIASES
                and node not in self.forced and isinstance(node.args[0], torch.fx.Node)
                and isinstance(value_of(node), torch.Tensor))

    def resolve(self, node: torch.fx.Node, scalable: bool = False) -> Operand | None:
        """The operand of `node` over its materialized base, or None (a view meta tensors cannot replay:
        the caller forces that node to be materialized). `scalable`: multiplications by a Python scalar
        on the way are skipped and their product kept in `Operand.scale` (a matmul folds it into alpha)."""
        chain = []
        base = node
        scale = 1.0
        while True:
            if self.is_alias(base):
                chain.append(base)
                base = base.args[0]
            elif (scalable and isinstance(base, torch.fx.Node) and base.op == "call_function"
                  and base.target in SCALES and len(base.args) == 2 and not base.kwargs
                  and isinstance(base.args[0], torch.fx.Node) and scalar(base.args[1]) is not None
                  and isinstance(value_of(base.args[0]), torch.Tensor)
                  and value_of(base.args[0]).dtype == value_of(base).dtype
                  and tuple(value_of(base.args[0]).shape) == tuple(value_of(base).shape)):
                scale *= scalar(base.args[1])
                base = base.args[0]
            else:
                break
        val = value_of(base)
        if not isinstance(val, torch.Tensor):
            return None
        view = torch.empty(tuple(val.shape), dtype=val.dtype, device="meta")
        replayed: list[torch.fx.Node] = []
        for alias in reversed(chain):
            try:
                view = _replay_alias(alias, view)
            except (RuntimeError, TypeError, ValueError):
                # Not a strided view of the base: materialize the last copy before it (a `clone` whose
                # contiguous result this view needs) or the view itself, and read from there.
                clones = [n for n in replayed if n.target is aten.clone.default]
                self.forced.add(clones[-1] if clones else alias)
                return self.resolve(node, scalable)
            replayed.append(alias)
        return Operand(base, view, scale)


def broadcast_operand(resolver: Resolver, other: torch.fx.Node, cur: torch.fx.Node,
                      precedes: Any, same_dtype: bool = True) -> Operand | None:
    """`other` (broadcastable to `cur`'s shape; of `cur`'s dtype when `same_dtype`) as an operand expanded
    to that shape, or None when it cannot be one or `precedes(operand)` says it is not ready before the
    op that would read it."""
    ov, cv = value_of(other), value_of(cur)
    if not isinstance(ov, torch.Tensor) or (same_dtype and ov.dtype != cv.dtype):
        return None
    try:
        if torch.broadcast_shapes(tuple(ov.shape), tuple(cv.shape)) != tuple(cv.shape):
            return None
    except RuntimeError:
        return None
    operand = resolver.resolve(other)
    if operand is None or not precedes(operand):
        return None
    return Operand(operand.base, operand.view.expand(tuple(cv.shape)))


def scalar(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def add_operand(node: torch.fx.Node, cur: torch.fx.Node) -> torch.fx.Node | None:
    """The other operand of `add(cur, other)` / `add(other, cur)` with alpha 1, else None."""
    if node.target is not aten.add.Tensor or node.kwargs.get("alpha", 1) != 1 or len(node.args) != 2:
        return None
    x, y = node.args
    other = y if x is cur else x if y is cur else None
    return other if isinstance(other, torch.fx.Node) and other is not cur else None


@dataclass(frozen=True)
class Tunable:
    """Launch variants of one library op that a plan carries for load-time autotuning: `key` is the
    device-independent autotune key, `launches[0]` the default. `then[i]`: the dispatches that follow
    launch i when it wins (a split-K matmul's combine; the default runs alone), and `scratch` (role ->
    bytes) the plan buffers they share."""

    key: str
    flops: int
    launches: list[KernelLaunch]
    then: list[tuple[KernelLaunch, ...]] = field(default_factory=list)
    scratch: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, kind: str, problem: Any, launches: list[KernelLaunch], then: list[tuple[KernelLaunch, ...]]
           | None = None, scratch: dict[str, int] | None = None) -> Tunable:
        """The launches (the default first) that solve the kernel family `kind`'s `problem`, keyed by the
        problem's autotune class and weighted by its flops."""
        return cls(autotune.problem_key(kind, problem), problem.flops, launches, then or [], scratch or {})


@dataclass(frozen=True)
class LibraryDispatch:
    """One DISPATCH of a library op that takes several (multi-pass reductions, a narrowing store):
    `windows[role]` = (byte offset into the role's binding, bytes) to bind instead of the whole value;
    scratch roles (an op's `scratch(caps)`) are plan buffers between its dispatches."""

    launch: KernelLaunch
    tunable: Tunable | None = None
    windows: dict[str, tuple[int, int]] | None = None


def rebind(launch: KernelLaunch, roles: dict[str, str]) -> KernelLaunch:
    """`launch` with its binding roles renamed (e.g. "out" -> a scratch role that a narrowing reads)."""
    return replace(launch, bindings=tuple(roles.get(r, r) for r in launch.bindings))
