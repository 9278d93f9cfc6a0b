"""The reduction family of the partitioner: sum / mean / amax / amin over all dims or over a run of
adjacent dims (the last ones, or any run: x is seen as [outer, length, inner]) become the kernel
library's multi-pass reduction (kernels/reduce.py): pass 1 splits each reduced row into chunks so every
workgroup is busy and writes partial states to a plan buffer, pass 2 combines them. f32 and f16
(accumulated in f32; the f16 result is stored through an f32 scratch and a narrowing dispatch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.fx

from torch_webgpu.kernels import autotune
from torch_webgpu.kernels.launch import DeviceCaps, KernelLaunch
from torch_webgpu.kernels.narrow import plan_narrow
from torch_webgpu.kernels.reduce import ReduceProblem, bytes_read, plan_reduce, variants

from ..operands import LibraryDispatch, Operand, Resolver, Tunable, rebind, value_of
from .family import Family, MatchContext

aten = torch.ops.aten
_DTYPES = {torch.float32: "f32", torch.float16: "f16"}
REDUCTIONS = {aten.sum.dim_IntList: "sum", aten.sum.default: "sum", aten.mean.dim: "mean",
              aten.mean.default: "mean", aten.amax.default: "amax", aten.amin.default: "amin"}


@dataclass
class ReduceOp:
    """One library reduction (`root` is `final`: the reduction node), its problem and its input."""

    root: torch.fx.Node
    final: torch.fx.Node
    absorbed: list[torch.fx.Node]
    problem: ReduceProblem
    x: Operand
    narrow: bool = False     # an f16 result: reduced into f32 scratch, then narrowed

    def roles(self) -> dict[str, Operand]:
        """Every operand the op reads, by its binding roles (x's buffer is also bound as vec4 words)."""
        return {"x": self.x, "x_vec4": self.x}

    def operands(self) -> list[Operand]:
        """Every operand the op reads."""
        return [self.x]

    def launch(self, caps: DeviceCaps) -> KernelLaunch:
        """The library's first launch of this op on `caps` (its default variant there)."""
        return plan_reduce(self.problem, caps).steps[0].launch

    def scratch(self, caps: DeviceCaps) -> dict[str, int]:
        """Plan buffers between the op's dispatches (role -> bytes): the partial states, the f32 result."""
        extra = {"out32": self.problem.out_bytes()} if self.narrow else {}
        return {**plan_reduce(self.problem, caps).scratch, **extra}

    def dispatches(self, caps: DeviceCaps) -> list[LibraryDispatch]:
        """Pass 1 (one launch per window of x) and pass 2, then the narrowing; each pass carries its
        variants (the same chunking, so the passes of different variants combine) for load-time tuning."""
        p = self.problem
        roles = {"out": "out32"} if self.narrow else {}
        names = variants(p, caps)[:autotune.MAX_CANDIDATES]
        plans = [plan_reduce(p, caps, v) for v in names]
        key = autotune.problem_key("reduce", _Keyed(p))
        steps = []
        for i, step in enumerate(plans[0].steps):
            launches = [rebind(plan.steps[i].launch, roles) for plan in plans
                        if len(plan.steps) == len(plans[0].steps)]
            windows = {roles.get(r, r): w for r, w in step.windows.items()}
            tunable = Tunable(f"{key}|pass{i}", 8 * bytes_read(p), launches) if len(launches) > 1 else None
            steps.append(LibraryDispatch(launches[0], tunable, windows))
        if self.narrow:
            steps.append(LibraryDispatch(rebind(plan_narrow(p.outer * p.inner, caps), {"x": "out32"})))
        return steps


@dataclass(frozen=True)
class _Keyed:
    """A reduce problem's autotuning class: op, dtype and power-of-two buckets of its extents."""

    p: ReduceProblem

    @property
    def dtype(self) -> str:
        return self.p.dtype

    def shape_class(self) -> str:
        def bucket(x: int) -> int:
            return 1 << max(0, (x - 1).bit_length())
        return f"{self.p.op}.o{bucket(self.p.outer)}l{bucket(self.p.length)}i{bucket(self.p.inner)}"


class ReduceMatcher:
    """Matches the reductions of the module doc."""

    def __init__(self, order: dict[torch.fx.Node, int], resolver: Resolver, caps: DeviceCaps):
        self.order, self.resolver, self.caps = order, resolver, caps

    def match(self, node: torch.fx.Node) -> ReduceOp | None:
        """The library reduction `node`, or None (IREE computes it)."""
        op = REDUCTIONS.get(node.target)
        x = node.args[0] if node.args else None
        xv, val = value_of(x), value_of(node)
        if op is None or not (isinstance(xv, torch.Tensor) and isinstance(val, torch.Tensor)):
            return None
        if xv.dtype not in _DTYPES or val.dtype != xv.dtype or xv.numel() == 0 or xv.dim() == 0:
            return None
        dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        if node.target in (aten.sum.default, aten.mean.default) or dims is None:
            dims = []
        dims = [dims] if isinstance(dims, int) else list(dims)
        if not all(isinstance(d, int) for d in dims):
            return None
        nd = xv.dim()
        dims = sorted({d % nd for d in dims}) if dims else list(range(nd))
        if dims != list(range(dims[0], dims[-1] + 1)):
            return None   # not one run of adjacent dims
        shape = [int(s) for s in xv.shape]
        outer, length = math.prod(shape[:dims[0]]), math.prod(shape[dims[0]:dims[-1] + 1])
        inner = math.prod(shape[dims[-1] + 1:])
        operand = self.resolver.resolve(x)
        if operand is None or self.order[operand.base] >= self.order[node] or (
                not operand.view.is_contiguous()):
            return None
        base = value_of(operand.base)
        problem = ReduceProblem(op, _DTYPES[xv.dtype], outer, length, inner,
                                offset=int(operand.view.storage_offset()),
                                x_buffer_bytes=int(base.numel()) * base.element_size())
        try:
            plan = plan_reduce(problem, self.caps)
        except (ValueError, TypeError):
            return None
        if not plan.steps:
            return None
        return ReduceOp(node, node, [], problem, operand, narrow=xv.dtype == torch.float16)


def reduce_matcher(context: MatchContext) -> ReduceMatcher:
    """The graph's reduction matcher."""
    return ReduceMatcher(context.order, context.resolver, context.caps)


def match_reduce(node: torch.fx.Node, context: MatchContext) -> ReduceOp | None:
    """The library reduction `node`, or None."""
    return context.matcher(reduce_matcher).match(node)


FAMILY = Family("reduce", frozenset(REDUCTIONS), match_reduce)
