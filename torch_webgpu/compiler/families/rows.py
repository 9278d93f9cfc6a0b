"""The row family of the partitioner: softmax / log_softmax over the last dim, layer_norm (with its
affine) and rms_norm (transformers' LlamaRMSNorm: `x * rsqrt(x.pow(2).mean(-1, keepdim) + eps)`, then
the weight) as they reach the backend after decompositions, each one library rows dispatch
(kernels/rows.py: a workgroup per row, the row in registers, one read of x).

Matched forms: `_softmax` / `_log_softmax`; log_softmax decomposed (amax, sub, exp, sum, log, sub);
layer_norm as `var_mean(correction=0)`, rsqrt, sub, mul, mul weight, add bias (or `native_layer_norm`
whose statistics nothing reads); the rms pattern. An f16 input widened to f32 around the op (and the
f32 result narrowed back) is read and written as f16, the arithmetic in f32 as torch's. An f16 result
whose rows are not vec4 is stored through an f32 scratch and a narrowing dispatch.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, replace

import torch
import torch.fx

from torch_webgpu.kernels import autotune
from torch_webgpu.kernels.launch import DeviceCaps, KernelLaunch
from torch_webgpu.kernels.narrow import plan_narrow
from torch_webgpu.kernels.rows import RowProblem, plan_rows, variants

from ..operands import LibraryDispatch, Operand, Resolver, Tunable, rebind, scalar, value_of
from .family import Family, MatchContext

aten = torch.ops.aten
_DTYPES = {torch.float32: "f32", torch.float16: "f16"}
_CONVERT = torch.ops.prims.convert_element_type.default
_ADDS = (aten.add.Tensor, aten.add.Scalar)   # `+ eps` (F.rms_norm's decomposition adds a Scalar)
ROW_ROOTS = frozenset({aten._softmax.default, aten._log_softmax.default, aten.amax.default,
                       aten.var_mean.correction, aten.native_layer_norm.default, aten.pow.Tensor_Scalar})


@dataclass
class RowOp:
    """One library row op: `root` (its first node), `final` (the node whose value it writes), the nodes
    between (`absorbed`), the problem (x's layout filled in) and its operands."""

    root: torch.fx.Node
    final: torch.fx.Node
    absorbed: list[torch.fx.Node]
    problem: RowProblem
    x: Operand
    weight: Operand | None = None
    bias: Operand | None = None
    narrow: bool = False          # f16 result of rows that are not vec4: f32 scratch, then narrowed

    def roles(self) -> dict[str, Operand]:
        """Every operand the op reads, by its binding role in the library's launch."""
        roles = {"x": self.x, "weight": self.weight, "bias": self.bias}
        return {role: o for role, o in roles.items() if o is not None}

    def operands(self) -> list[Operand]:
        """Every operand the op reads."""
        return list(self.roles().values())

    def launch(self, caps: DeviceCaps) -> KernelLaunch:
        """The library's first launch of this op on `caps` (its default variant there)."""
        return plan_rows(self.problem, caps).steps[0]

    def scratch(self, caps: DeviceCaps) -> dict[str, int]:
        """Plan buffers between the op's dispatches (role -> bytes)."""
        extra = {"out32": self.problem.rows * self.problem.n * 4} if self.narrow else {}
        return {**plan_rows(self.problem, caps).scratch, **extra}

    def dispatches(self, caps: DeviceCaps) -> list[LibraryDispatch]:
        """The op's dispatches in order; a one-dispatch plan carries its variants for load-time tuning."""
        p = self.problem
        roles = {"out": "out32"} if self.narrow else {}
        plan = plan_rows(p, caps)
        if len(plan.steps) == 1:
            names = variants(p, caps)[:autotune.MAX_CANDIDATES]
            launches = [rebind(plan_rows(p, caps, v).steps[0], roles) for v in names]
            tunable = Tunable.of("rows", p, launches)
            steps = [LibraryDispatch(launches[0], tunable)]
        else:
            steps = [LibraryDispatch(rebind(s, roles)) for s in plan.steps]
        if self.narrow:
            steps.append(LibraryDispatch(rebind(plan_narrow(p.rows * p.n, caps), {"x": "out32"})))
        return steps


def _is(node: object, *targets: object) -> bool:
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target in targets


def _other(node: torch.fx.Node, cur: torch.fx.Node) -> object:
    """The other operand of the binary `node` that reads `cur`."""
    x, y = node.args[:2]
    return y if x is cur else x


class RowsMatcher:
    """Matches the row ops of the module doc from their first node."""

    def __init__(self, order: dict[torch.fx.Node, int], graph_outputs: set[torch.fx.Node],
                 resolver: Resolver, caps: DeviceCaps, taken: set[torch.fx.Node]):
        self.order, self.graph_outputs, self.resolver, self.caps = order, graph_outputs, resolver, caps
        self.taken = taken

    def _user(self, node: torch.fx.Node, *targets: object) -> torch.fx.Node | None:
        """The single user of `node` (one of `targets`), unless `node` is also a graph output."""
        if len(node.users) != 1 or node in self.graph_outputs:
            return None
        (user,) = node.users
        return user if _is(user, *targets) else None

    def match(self, node: torch.fx.Node) -> RowOp | None:
        """The library row op that starts at `node`, or None (IREE computes it)."""
        t = node.target
        if t in (aten._softmax.default, aten._log_softmax.default):
            return self._softmax(node)
        if t is aten.amax.default:
            return self._log_softmax(node)
        if t in (aten.var_mean.correction, aten.native_layer_norm.default):
            return self._layer_norm(node)
        if t is aten.pow.Tensor_Scalar:
            return self._rms_norm(node)
        return None

    def _affine_user(self, cur: torch.fx.Node, target: object) -> tuple[torch.fx.Node, torch.fx.Node] | None:
        """(user, vector) when `cur`'s single user multiplies / adds (alpha 1) a vector of its last dim (a
        weight, a bias: of its dtype, or f16 read by the f32 arithmetic of a widened f16 op), else None."""
        user = self._user(cur, target)
        if user is None or len(user.args) != 2 or user.kwargs.get("alpha", 1) != 1:
            return None
        other, cv = _other(user, cur), value_of(cur)
        ov = value_of(other)
        dtypes = (cv.dtype, torch.float16) if cv.dtype == torch.float32 else (cv.dtype,)
        if not (isinstance(ov, torch.Tensor) and ov.dtype in dtypes and ov.numel() == cv.shape[-1]
                and ov.dim() <= cv.dim() and ov.shape[-1] == cv.shape[-1]):
            return None
        return user, other

    # -- the patterns --
    def _last_dim(self, node: torch.fx.Node, dims: object) -> bool:
        nd = value_of(node).dim()
        dims = list(dims) if isinstance(dims, (list, tuple)) else [dims]
        return nd > 0 and len(dims) == 1 and isinstance(dims[0], int) and dims[0] % nd == nd - 1

    def _softmax(self, node: torch.fx.Node) -> RowOp | None:
        x, dim = node.args[:2]
        if not isinstance(x, torch.fx.Node) or not self._last_dim(x, dim):
            return None
        op = "softmax" if node.target is aten._softmax.default else "log_softmax"
        return self._build(op, x, node, node, [])

    def _log_softmax(self, amax: torch.fx.Node) -> RowOp | None:
        # sub(sub(x, amax(x, [-1], True)), log(sum(exp(that sub), [-1], True)))
        x = amax.args[0]
        if not (isinstance(x, torch.fx.Node) and len(amax.args) >= 3 and amax.args[2] is True
                and self._last_dim(x, amax.args[1])):
            return None
        sub = self._user(amax, aten.sub.Tensor)
        if sub is None or sub.args[:2] != (x, amax) or len(sub.users) != 2 or sub in self.graph_outputs:
            return None
        exp = next((u for u in sub.users if _is(u, aten.exp.default)), None)
        final = next((u for u in sub.users if _is(u, aten.sub.Tensor) and u.args[0] is sub), None)
        if exp is None or final is None:
            return None
        total = self._user(exp, aten.sum.dim_IntList)
        if total is None or not (len(total.args) >= 3 and total.args[2] is True
                                 and self._last_dim(exp, total.args[1])):
            return None
        log = self._user(total, aten.log.default)
        if log is None or self._user(log, aten.sub.Tensor) is not final or final.args[1] is not log:
            return None
        return self._build("log_softmax", x, amax, final, [sub, exp, total, log])

    def _layer_norm(self, node: torch.fx.Node) -> RowOp | None:
        absorbed: list[torch.fx.Node] = []
        weight = bias = None
        if node.target is aten.native_layer_norm.default:
            x, shape, weight, bias, eps = node.args[:5]
            if not isinstance(x, torch.fx.Node) or len(shape) != 1 or value_of(x).dim() == 0:
                return None
            outs = [u for u in node.users if _is(u, operator.getitem) and u.args[1] == 0]
            unused = [u for u in node.users if u not in outs]   # the statistics: nothing may read them
            if node in self.graph_outputs or len(outs) != 1 or any(
                    not _is(u, operator.getitem) or u.users or u in self.graph_outputs for u in unused):
                return None
            cur = outs[0]
            absorbed += unused
        else:
            x = node.args[0]
            if not (isinstance(x, torch.fx.Node) and node.kwargs.get("correction") == 0
                    and node.kwargs.get("keepdim") is True and len(node.args) >= 2
                    and self._last_dim(x, node.args[1])):
                return None
            getitems = {u.args[1]: u for u in node.users if _is(u, operator.getitem)}
            if len(getitems) != 2 or len(node.users) != 2 or node in self.graph_outputs:
                return None
            var, mean = getitems[0], getitems[1]
            add = self._user(var, *_ADDS)
            eps = scalar(add.args[1]) if add is not None and add.args[0] is var else None
            rsqrt = self._user(add, aten.rsqrt.default) if eps is not None else None
            sub = self._user(mean, aten.sub.Tensor)
            if rsqrt is None or sub is None or sub.args[:2] != (x, mean):
                return None
            mul = self._user(sub, aten.mul.Tensor)
            if mul is None or self._user(rsqrt, aten.mul.Tensor) is not mul:
                return None
            absorbed += [var, mean, add, rsqrt, sub]
            cur = mul
            scaled = self._affine_user(cur, aten.mul.Tensor)
            if scaled is not None:
                absorbed.append(cur)
                cur, weight = scaled
                shifted = self._affine_user(cur, aten.add.Tensor)
                if shifted is not None:
                    absorbed.append(cur)
                    cur, bias = shifted
        if not isinstance(eps, (int, float)):
            return None
        return self._build("layer_norm", x, node, cur, absorbed, float(eps), weight, bias)

    def _rms_norm(self, pow_: torch.fx.Node) -> RowOp | None:
        # mul(x, rsqrt(add(mean(pow(x, 2), [-1], True), eps))), then (after a narrowing) the weight
        x = pow_.args[0]
        if not isinstance(x, torch.fx.Node) or pow_.args[1] != 2:
            return None
        mean = self._user(pow_, aten.mean.dim)
        if mean is None or not (len(mean.args) >= 3 and mean.args[2] is True and not mean.kwargs.get("dtype")
                                and self._last_dim(x, mean.args[1])):
            return None
        add = self._user(mean, *_ADDS)
        eps = scalar(add.args[1]) if add is not None and add.args[0] is mean else None
        rsqrt = self._user(add, aten.rsqrt.default) if eps is not None else None
        mul = self._user(rsqrt, aten.mul.Tensor) if rsqrt is not None else None
        if mul is None or _other(mul, rsqrt) is not x:
            return None
        absorbed, cur, weight = [mean, add, rsqrt], mul, None
        narrow = self._user(cur, _CONVERT)
        if narrow is not None and value_of(narrow).dtype == torch.float16:
            absorbed.append(cur)
            cur = narrow
        elif narrow is not None:
            return None
        scaled = self._affine_user(cur, aten.mul.Tensor)
        if scaled is not None:
            absorbed.append(cur)
            cur, weight = scaled
        return self._build("rms_norm", x, pow_, cur, absorbed, float(eps), weight)

    # -- the op --
    def _build(self, op: str, x: torch.fx.Node, first: torch.fx.Node, final: torch.fx.Node,
               absorbed: list[torch.fx.Node], eps: float = 0.0, weight: object = None,
               bias: object = None) -> RowOp | None:
        """The row op over `x` (read as its f16 source when it widens one that only the op reads) from
        `first` to `final`, or None when a node of it is needed elsewhere or no kernel fits."""
        narrowing = self._user(final, _CONVERT)
        if narrowing is not None and value_of(final).dtype == torch.float32 and (
                value_of(narrowing).dtype == torch.float16):
            absorbed, final = [*absorbed, final], narrowing   # stored as f16 (rounded once, as torch)
        xv, fv = value_of(x), value_of(final)
        if not (isinstance(xv, torch.Tensor) and isinstance(fv, torch.Tensor)) or xv.numel() == 0:
            return None
        if tuple(fv.shape) != tuple(xv.shape) or fv.dtype not in _DTYPES or xv.dtype not in _DTYPES:
            return None
        nodes = [n for n in (first, *absorbed) if n is not final]
        source = value_of(x.args[0]) if _is(x, _CONVERT) else None
        if isinstance(source, torch.Tensor) and source.dtype == torch.float16 and xv.dtype == torch.float32:
            if all(u in nodes or u is final for u in x.users) and x not in self.graph_outputs:
                nodes.insert(0, x)
                x = x.args[0]
        inside = set(nodes) | {final}
        for n in nodes:
            if n in self.taken or n in self.graph_outputs or any(u not in inside for u in n.users):
                return None
        if final in self.taken:
            return None
        root = min(inside, key=self.order.__getitem__)
        n = int(xv.shape[-1])
        rows = xv.numel() // n
        dtype = _DTYPES[value_of(x).dtype]
        operand = self.resolver.resolve(x)
        if operand is None or self.order[operand.base] >= self.order[root]:
            return None
        try:
            v2 = operand.view.view(rows, n)
        except RuntimeError:
            return None
        if n > 1 and v2.stride(1) != 1:
            return None
        affine = []
        for t in (weight, bias):
            if t is None:
                affine.append(None)
                continue
            tv = value_of(t)
            if not (isinstance(tv, torch.Tensor) and tv.numel() == n and tv.dim() > 0 and tv.shape[-1] == n
                    and _DTYPES.get(tv.dtype) == dtype):
                return None
            o = self.resolver.resolve(t)
            if o is None or self.order[o.base] >= self.order[root] or not o.view.is_contiguous() or (
                    o.view.storage_offset() != 0):
                return None   # the kernel reads weight and bias from element 0 of their buffers
            affine.append(o)
        stride = int(v2.stride(0)) if rows > 1 else n
        problem = RowProblem(op, dtype, rows, n, int(v2.storage_offset()), stride, eps,
                             affine[0] is not None, affine[1] is not None, out_dtype=_DTYPES[fv.dtype])
        narrow = False
        try:
            plan_rows(problem, self.caps)
        except ValueError:
            if problem.out_dtype != "f16":
                return None
            problem, narrow = replace(problem, out_dtype="f32"), True
        try:
            plan = plan_rows(problem, self.caps)
        except (ValueError, TypeError):
            return None
        limit = self.caps.limit("max-compute-workgroups-per-dimension", 65535)
        if not plan.steps or max(max(s.grid) for s in plan.steps) > limit:
            return None
        rest = [n for n in nodes if n is not root]
        return RowOp(root, final, rest, problem, operand, affine[0], affine[1], narrow)


def rows_matcher(context: MatchContext) -> RowsMatcher:
    """The graph's row-op matcher (it reads the nodes library ops took so far)."""
    return RowsMatcher(context.order, context.graph_outputs, context.resolver, context.caps, context.taken)


def match_rows(node: torch.fx.Node, context: MatchContext) -> RowOp | None:
    """The library row op that starts at `node`, or None."""
    return context.matcher(rows_matcher).match(node)


FAMILY = Family("rows", ROW_ROOTS, match_rows)
