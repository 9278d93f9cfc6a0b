"""The attention family of the partitioner: `softmax(scale * Q K^T + mask) V` as it reaches the backend
after decompositions (bmm, scalar scale, additive mask, `_softmax` with `_safe_softmax`'s guard for
fully masked rows, bmm) becomes one flash-attention library dispatch (kernels/attention.py): the L x S
score matrix is never written.

Q, K and V are read through their strides (K^T's view gives K), scalar factors on Q, K or the scores
fold into the scale, and an additive mask (a causal mask built by `where(tril, 0, -inf)`, a padding
mask) or a boolean one (`masked_fill(~mask, -inf)`, read as the plan's one-word-per-element bools) is read
broadcast through its strides. Rows whose keys are all masked give 0, as `_safe_softmax`. A mask that no
graph input decides (transformers' causal mask of a prefill without a cache: aranges, comparisons and a
`where` of scalars) is evaluated at compile time; if it is the causal one the kernel's causal flag replaces
it (no mask read, the keys past each query block skipped).

Grouped-query attention: K and V repeated to the query heads (transformers' `repeat_kv`, or
`repeat_interleave`: `expand` of an `unsqueeze`, `clone`, `view`) are read per KV head (head // groups),
so the repeated copy is never materialized. `softmax(scores.float()).to(f16)` and a float32 attention of
widened float16 Q, K, V narrowed back to float16 (torch's math SDPA of f16 inputs, also when the widening
follows `repeat_kv` and the f16 mask is promoted by the add) run as the f16 kernel, whose arithmetic is
f32. Decode-shaped ops run the split-K variant: two dispatches over a scratch buffer
(`launches`, `scratch`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
import torch.fx

from torch_webgpu.kernels import autotune
from torch_webgpu.kernels.attention import (
    AttentionProblem,
    Strided,
    partials_bytes,
    plan_attention,
    plan_attention_combine,
    variants,
)
from torch_webgpu.kernels.launch import DeviceCaps, KernelLaunch

from ..operands import SCALES, LibraryDispatch, Operand, Resolver, Tunable, scalar, value_of
from .family import Family, MatchContext

aten = torch.ops.aten
_DTYPES = {torch.float32: "f32", torch.float16: "f16"}
_CONVERT = torch.ops.prims.convert_element_type.default
_SCALINGS = frozenset({aten.mul.Tensor, aten.mul.Scalar, aten.div.Tensor, aten.div.Scalar})
_GUARD = frozenset({aten.eq.Scalar, torch.ops.prims.convert_element_type.default, aten.amin.default,
                    aten.ne.Scalar, aten.full_like.default, aten.where.self})


@dataclass
class AttentionOp:
    """One library attention: the first bmm (`root`), the second (`final`) and everything between."""

    root: torch.fx.Node
    final: torch.fx.Node
    absorbed: list[torch.fx.Node]
    problem: AttentionProblem      # sizes, scale, mask kind, dtype (layouts filled in by `launch`)
    q: Operand                     # [batch, heads, lq, d] views
    k: Operand                     # [batch, heads, lk, d]
    v: Operand                     # [batch, heads, lk, dv]
    mask: Operand | None = None    # [batch, heads, lq, lk]

    def roles(self) -> dict[str, Operand]:
        """Every operand the op reads, by its binding role in the library's launch."""
        roles = {"q": self.q, "k": self.k, "v": self.v, "mask": self.mask}
        return {role: o for role, o in roles.items() if o is not None}

    def operands(self) -> list[Operand]:
        """Every operand the op reads."""
        return list(self.roles().values())

    def full_problem(self) -> AttentionProblem:
        """The library problem with the operands' layouts."""
        layouts = {name: _strided(o.view) for name, o in (("q", self.q), ("k", self.k), ("v", self.v))}
        if self.mask is not None:
            layouts["mask_layout"] = _strided(self.mask.view)
        return replace(self.problem, **layouts)

    def launch(self, caps: DeviceCaps) -> KernelLaunch:
        """The library's launch of this op on `caps` (its default variant there)."""
        return plan_attention(self.full_problem(), caps)

    def dispatches(self, caps: DeviceCaps) -> list[LibraryDispatch]:
        """The op's dispatches in order: the attention (with its tuning candidates), and after a
        split-K variant its combine pass."""
        first = LibraryDispatch(self.launch(caps), self.candidates(caps))
        if "partials" not in first.launch.bindings:
            return [first]
        return [first, LibraryDispatch(plan_attention_combine(self.full_problem(), caps))]

    def scratch(self, caps: DeviceCaps) -> dict[str, int]:
        """Scratch buffers (role -> bytes) the op's dispatches share: a split-K variant's partial states."""
        if "partials" not in self.launch(caps).bindings:
            return {}
        return {"partials": partials_bytes(self.full_problem())}

    def candidates(self, caps: DeviceCaps) -> Tunable:
        """The variants the machine that runs the plan times once (the default first)."""
        p = self.full_problem()
        names = variants(p, caps)[:autotune.MAX_CANDIDATES]
        return Tunable.of("attention", p, [plan_attention(p, caps, v) for v in names])


def _strided(view: torch.Tensor) -> Strided:
    return Strided(int(view.storage_offset()), tuple(int(s) for s in view.stride()))  # type: ignore[arg-type]


def _as4(operand: Operand, shape: tuple[int, int, int, int]) -> Operand | None:
    """The operand's view reshaped to [batch, heads, rows, cols], or None if its strides do not allow it."""
    try:
        return Operand(operand.base, operand.view.view(*shape), operand.scale)
    except RuntimeError:
        return None


def _casts(node: torch.fx.Node, source: torch.fx.Node, src: torch.dtype, dst: torch.dtype) -> bool:
    """`node` converts `source` (of dtype `src`) to `dst`."""
    val, sval = value_of(node), value_of(source)
    return (node.target is _CONVERT and node.args[0] is source and isinstance(val, torch.Tensor)
            and isinstance(sval, torch.Tensor) and sval.dtype == src and val.dtype == dst)


_HEAD_VIEWS = frozenset({aten.view.default, aten._unsafe_view.default, aten.expand.default,
                         aten.clone.default, aten.permute.default, aten.transpose.int})


def _widened_operand(resolver: Resolver, node: torch.fx.Node) -> Operand | None:
    """The float32 operand `node` (views and scalar factors over a cast of a float16 value) read as that
    float16 value through the same views (the cast commutes with them), else None."""
    chain, factor, base = [], 1.0, node
    while True:
        if resolver.is_alias(base):
            chain.append(base)
        elif _scaling(base):
            factor *= scalar(base.args[1])
        else:
            break
        base = base.args[0]
    if not (isinstance(base, torch.fx.Node) and base.op == "call_function"
            and _casts(base, base.args[0], torch.float16, torch.float32)):
        return None
    inner = resolver.resolve(base.args[0], scalable=True)
    if inner is None:
        return None
    view = inner.view
    try:
        for alias in reversed(chain):
            view = view if alias.target is aten.clone.default else alias.target(view, *alias.args[1:],
                                                                                **alias.kwargs)
    except (RuntimeError, TypeError, ValueError):
        return None
    return Operand(inner.base, view, inner.scale * factor)


def _grouped_operand(resolver: Resolver, resolve: Callable[[torch.fx.Node], Operand | None],
                     node: torch.fx.Node, shape: tuple[int, int, int, int],
                     widened: bool = False) -> tuple[Operand, int] | None:
    """A bmm operand whose heads repeat fewer KV heads (`repeat_kv`: `expand` of an `unsqueeze(2)` to
    [b, kv, groups, rows, cols], `clone`, `view` to [b, kv * groups, rows, cols]; `repeat_interleave`
    decomposes to the same) as (the [b, kv, rows, cols] operand read for shape `shape`, kv), else None.
    The copy of the repeated heads is not materialized: the kernel reads KV head h // groups. `widened`:
    a float32 operand may widen the repeated float16 heads on the way (torch's math SDPA casts after
    transformers' repeat_kv); the cast commutes with the views and the f16 heads are read."""
    chain, source, factor, crossed = [], node, 1.0, False
    while (resolver.is_alias(source) and source.target in _HEAD_VIEWS) or _scaling(source) or (
            widened and not crossed and isinstance(source, torch.fx.Node) and source.op == "call_function"
            and _casts(source, source.args[0], torch.float16, torch.float32)):
        inner = source.args[0]
        if source.target is _CONVERT:
            crossed = True
            source = inner
            continue
        if not resolver.is_alias(source):   # sdpa scales K by sqrt(scale) after the repeat: fold it
            factor *= scalar(source.args[1])
            source = inner
            continue
        iv, sv = value_of(inner), value_of(source)
        if (source.target in (aten.view.default, aten._unsafe_view.default) and iv.dim() == 5
                and sv.dim() == 4 and iv.shape[1] * iv.shape[2] == sv.shape[1] and iv.shape[2] > 1
                and (iv.shape[0], *iv.shape[3:]) == (sv.shape[0], *sv.shape[2:])):
            break
        chain.append(source)
        source = inner
    else:
        return None
    if not resolver.is_alias(source.args[0]):
        return None
    repeated = source.args[0]
    # Only the views after the head merge may differ from it: a transpose of rows and cols at most.
    b, heads, rows, cols = (int(x) for x in value_of(source).shape)
    probe = torch.empty((b, heads, rows, cols), dtype=value_of(source).dtype, device="meta")
    try:
        for alias in reversed(chain):
            probe = probe if alias.target is aten.clone.default else alias.target(
                probe, *alias.args[1:], **alias.kwargs)
        probe = probe.view(*shape)
    except (RuntimeError, TypeError, ValueError):
        return None
    plain = (heads * rows * cols, rows * cols, cols, 1)
    transposed = tuple(shape[2:]) == (cols, rows) and tuple(probe.stride()) == (*plain[:2], 1, cols)
    if tuple(probe.stride()) != plain and not transposed:
        return None
    operand = resolver.resolve(repeated, scalable=True) if crossed else resolve(repeated)
    if operand is None or operand.view.dim() != 5 or operand.view.stride(2) != 0:
        return None
    view = operand.view.select(2, 0)
    view = view.transpose(-2, -1) if transposed else view
    return Operand(operand.base, view, operand.scale * factor), int(view.shape[1])


def _scaling(node: object) -> bool:
    """`node` multiplies a tensor by a Python scalar (same shape and dtype)."""
    return (isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target in SCALES
            and len(node.args) == 2 and not node.kwargs and isinstance(node.args[0], torch.fx.Node)
            and scalar(node.args[1]) is not None and isinstance(value_of(node.args[0]), torch.Tensor)
            and value_of(node.args[0]).dtype == value_of(node).dtype
            and tuple(value_of(node.args[0]).shape) == tuple(value_of(node).shape))


def _is_minus_inf(x: object) -> bool:
    """-inf as a Python float or a `scalar_tensor(-inf)` node."""
    if isinstance(x, torch.fx.Node):
        return x.target is aten.scalar_tensor.default and x.args[0] == float("-inf")
    return x == float("-inf")


class AttentionMatcher:
    """Matches bmm(softmax(bmm(Q, K^T) * scale + mask), V) from its first bmm (see the module doc)."""

    def __init__(self, order: dict[torch.fx.Node, int], graph_outputs: set[torch.fx.Node],
                 resolver: Resolver, caps: DeviceCaps):
        self.order, self.graph_outputs, self.resolver, self.caps = order, graph_outputs, resolver, caps
        self.widened = False   # matching an f32 attention of widened f16 values (see `match`)

    def _single_user(self, node: torch.fx.Node) -> torch.fx.Node | None:
        if len(node.users) != 1 or node in self.graph_outputs:
            return None
        (user,) = node.users
        return user if user.op == "call_function" else None

    def _through_views(self, node: torch.fx.Node, views: list[torch.fx.Node]) -> torch.fx.Node:
        """The first non-view user along node's single-user chain of views (the views into `views`)."""
        while (user := self._single_user(node)) is not None and self.resolver.is_alias(user) and (
                user.target in (aten.view.default, aten._unsafe_view.default, aten.expand.default)):
            views.append(user)
            node = user
        return node

    def _resolve(self, node: torch.fx.Node) -> Operand | None:
        """An operand (in widened mode: the float16 value that a float32 operand widens)."""
        if self.widened:
            return _widened_operand(self.resolver, node)
        return self.resolver.resolve(node, scalable=True)

    def match(self, root: torch.fx.Node) -> AttentionOp | None:
        """The library attention starting at bmm `root`, or None (not the pattern, or no variant). A
        float32 attention of widened float16 Q, K, V whose result is narrowed to float16 (torch's math SDPA
        of f16 inputs) runs as the f16 kernel (f32 arithmetic inside, as there)."""
        if root.target is not aten.bmm.default:
            return None
        val = value_of(root)
        if not isinstance(val, torch.Tensor) or val.dtype not in _DTYPES:
            return None
        op = None
        if val.dtype == torch.float32 and self.caps.shader_f16:
            self.widened = True
            try:
                op = self._match(root, "f16")
            finally:
                self.widened = False
        return op or self._match(root, _DTYPES[val.dtype])

    def _match(self, root: torch.fx.Node, dtype: str) -> AttentionOp | None:
        val = value_of(root)
        q_node, kt_node = root.args
        absorbed: list[torch.fx.Node] = []
        views: list[torch.fx.Node] = []
        scores = self._through_views(root, views)
        shape = tuple(value_of(scores).shape)
        if len(shape) not in (3, 4):
            return None
        batch, heads = (1, shape[0]) if len(shape) == 3 else shape[:2]
        lq, lk = shape[-2:]
        scale = 1.0
        mask_node, mask_kind = None, "additive"
        user = self._single_user(scores)
        if user is not None and user.target in _SCALINGS and (
                len(user.args) == 2 and user.args[0] is scores and scalar(user.args[1]) and not user.kwargs):
            factor = scalar(user.args[1])
            scale *= factor if user.target in (aten.mul.Tensor, aten.mul.Scalar) else 1.0 / factor
            absorbed.append(user)
            scores = user
        user = self._single_user(scores)
        if user is not None and user.target is aten.add.Tensor and user.kwargs.get("alpha", 1) == 1 and (
                len(user.args) == 2 and user.args[0] is scores and isinstance(user.args[1], torch.fx.Node)):
            mask_node = user.args[1]
            absorbed.append(user)
            scores = user
        elif user is not None and (attend := self._boolean_mask(user, scores, absorbed)) is not None:
            mask_node, mask_kind = attend, "bool32"
            scores = user
        masked = scores   # the scores the mask is added to (of the inputs' dtype)
        upcast = self._single_user(scores)
        if upcast is not None and _casts(upcast, scores, torch.float16, torch.float32):
            absorbed.append(upcast)   # softmax(scores.float()).to(f16): the kernel's f32 softmax
            scores = upcast
        else:
            upcast = None
        softmax = self._softmax_of(scores, absorbed)
        if softmax is None:
            return None
        if upcast is not None:
            narrowed = self._single_user(softmax)
            if narrowed is None or not _casts(narrowed, softmax, torch.float32, torch.float16):
                return None
            absorbed.append(narrowed)
            softmax = narrowed
        probs = self._through_views(softmax, views)
        second = self._single_user(probs)
        if second is None or second.target is not aten.bmm.default or second.args[0] is not probs:
            return None
        v_node = second.args[1]
        final = second
        if self.widened:   # the result narrowed to f16 (through reshapes) is what the kernel writes
            absorbed.append(second)
            while (user := self._single_user(final)) is not None and self.resolver.is_alias(user) and (
                    user.target in (aten.view.default, aten._unsafe_view.default)):
                absorbed.append(user)
                final = user
            narrowed = self._single_user(final)
            if narrowed is None or not _casts(narrowed, final, torch.float32, torch.float16):
                return None
            final = narrowed
        qv, ktv, vv = value_of(q_node), value_of(kt_node), value_of(v_node)
        if any(not isinstance(t, torch.Tensor) or t.dtype != val.dtype for t in (qv, ktv, vv)):
            return None
        d, dv = int(qv.shape[-1]), int(vv.shape[-1])
        if int(ktv.shape[-2]) != d:
            return None
        kv_heads = heads
        grouped = [_grouped_operand(self.resolver, self._resolve, n, s, self.widened)
                   for n, s in ((kt_node, (batch, heads, d, lk)), (v_node, (batch, heads, lk, dv)))]
        if all(g is not None for g in grouped) and grouped[0][1] == grouped[1][1]:
            # repeat_kv / repeat_interleave of the K and V heads: read each KV head for its query heads
            (kt4, kv_heads), (v4, _) = grouped
            q4 = self._operand4(q_node, (batch, heads, lq, d))
        else:
            q4, kt4, v4 = (self._operand4(n, s) for n, s in ((q_node, (batch, heads, lq, d)),
                                                              (kt_node, (batch, heads, d, lk)),
                                                              (v_node, (batch, heads, lk, dv))))
        if q4 is None or kt4 is None or v4 is None:
            return None
        k4 = Operand(kt4.base, kt4.view.transpose(-2, -1), kt4.scale)
        q, kt = q4, kt4
        mask, causal = None, False
        if mask_node is not None and _is_causal_mask(mask_node, mask_kind, (batch, heads, lq, lk)):
            causal = True   # a mask built from constants only (no input) that is the causal one
        elif mask_node is not None:
            found = self._mask_operand(mask_node, value_of(masked), (batch, heads, lq, lk), mask_kind)
            if found is None:
                return None
            mask, mask_kind = found
        for operand in (q4, k4, v4, *([mask] if mask else [])):
            if self.order[operand.base] >= self.order[root]:
                return None
        problem = AttentionProblem(batch=int(batch), heads=int(heads), lq=int(lq), lk=int(lk), d=d, dv=dv,
                                   kv_heads=int(kv_heads), mask=mask_kind if mask is not None else None,
                                   causal=causal,
                                   scale=scale * q.scale * kt.scale, dtype=dtype)
        op = AttentionOp(root, final, absorbed, problem, q4, k4, v4, mask)
        try:
            op.launch(self.caps)
        except (ValueError, TypeError):
            return None
        return op

    def _operand4(self, node: torch.fx.Node, shape: tuple[int, int, int, int]) -> Operand | None:
        """The bmm operand `node` as a [batch, heads, rows, cols] strided view: from the 4-d value that the
        bmm's flattening view (and the `expand`/`clone` before it) reads, else from `node` itself."""
        source = node
        while self.resolver.is_alias(source) and source.target in (
                aten.view.default, aten._unsafe_view.default, aten.expand.default, aten.clone.default):
            source = source.args[0]
            if tuple(value_of(source).shape) == shape:
                break
        if tuple(value_of(source).shape) == shape:
            return self._resolve(source)
        operand = self._resolve(node)
        return None if operand is None else _as4(operand, shape)

    def _softmax_of(self, scores: torch.fx.Node, absorbed: list[torch.fx.Node]) -> torch.fx.Node | None:
        """The probabilities node of `_softmax(scores, -1)` (through `_safe_softmax`'s all-masked guard:
        `where(amin(scores == -inf) != 0, 0, softmax)`), the softmax and guard nodes into `absorbed`."""
        if scores in self.graph_outputs:
            return None
        users = list(scores.users)
        softmax = next((u for u in users if u.target is aten._softmax.default), None)
        if softmax is None or softmax.args[1] not in (-1, value_of(scores).dim() - 1) or softmax.args[2]:
            return None
        if len(users) == 1:
            absorbed.append(softmax)
            return softmax
        # The guard: every other node on the way from `scores` to the `where` reads only scores/guard.
        guard, frontier = [], [u for u in users if u is not softmax]
        where = None
        while frontier:
            n = frontier.pop()
            if n in guard:
                continue
            if n.target not in _GUARD or n in self.graph_outputs:
                return None
            guard.append(n)
            if n.target is aten.where.self:
                where = n
                continue
            frontier += list(n.users)
        wheres = [n for n in guard if n.target is aten.where.self]
        if wheres != [where] or len(softmax.users) != 2 or where not in softmax.users or (
                where.args[2] is not softmax):
            return None
        others = [u for u in softmax.users if u is not where]
        if any(u.target is not aten.full_like.default for u in others):
            return None
        absorbed += [softmax, *guard, *[o for o in others if o not in guard]]
        return where

    def _boolean_mask(self, where: torch.fx.Node, scores: torch.fx.Node, absorbed: list[torch.fx.Node]
                      ) -> torch.fx.Node | None:
        """The boolean (True = attend) mask of `where(mask, scores, -inf)` or `where(~mask, -inf, scores)`
        (masked_fill after decompositions), `where` and what only it reads into `absorbed`; else None."""
        if where.target is not aten.where.self or len(where.args) != 3:
            return None
        cond, a, b = where.args
        if not isinstance(cond, torch.fx.Node) or value_of(cond).dtype != torch.bool:
            return None
        fill = b if a is scores else a if b is scores else None
        if fill is None or fill is scores or not _is_minus_inf(fill):
            return None
        taken = [where] + ([fill] if isinstance(fill, torch.fx.Node) and len(fill.users) == 1 else [])
        if a is not scores:   # the condition says where to mask: read the mask it negates
            if cond.target not in (aten.bitwise_not.default, aten.logical_not.default) or (
                    value_of(cond.args[0]).dtype != torch.bool):
                return None
            if len(cond.users) == 1 and cond not in self.graph_outputs:
                taken.append(cond)
            cond = cond.args[0]
        absorbed += taken
        return cond

    def _mask_operand(self, node: torch.fx.Node, scores_val: torch.Tensor,
                      shape: tuple[int, int, int, int], kind: str) -> tuple[Operand, str] | None:
        """The mask operand as a [batch, heads, lq, lk] view and its kernel mask kind, else None. In
        widened mode the float32 scores may get a float16 mask (`where(mask, 0, -inf)` of the model's
        dtype, promoted by the add: read as the f16 kernel's own "additive") or a float32 one."""
        mv = value_of(node)
        if not isinstance(mv, torch.Tensor):
            return None
        if kind == "bool32":
            if mv.dtype != torch.bool:
                return None
        elif self.widened and mv.dtype in (torch.float16, torch.float32):
            kind = "additive" if mv.dtype == torch.float16 else "additive_f32"
        elif mv.dtype != scores_val.dtype:
            return None
        try:
            if torch.broadcast_shapes(tuple(mv.shape), tuple(scores_val.shape)) != tuple(scores_val.shape):
                return None
        except RuntimeError:
            return None
        operand = self.resolver.resolve(node)
        if operand is None:
            return None
        try:
            view = operand.view.expand(tuple(scores_val.shape))
        except RuntimeError:
            return None
        mask = _as4(Operand(operand.base, view), shape)
        return None if mask is None else (mask, kind)


_CONSTANT_MASK_NODES = 400   # a mask computed from more nodes than this is not evaluated at compile time


def _constant_value(node: torch.fx.Node) -> torch.Tensor | None:
    """The value of `node` when it depends on no graph input (aranges, comparisons, `where` of scalars:
    a mask that only the sequence length decides), computed on the CPU; else None."""
    needed: dict[torch.fx.Node, None] = {}
    stack = [node]
    while stack:
        n = stack.pop()
        if n in needed:
            continue
        if n.op != "call_function" or len(needed) >= _CONSTANT_MASK_NODES:
            return None   # an input, a weight, or too large a computation
        needed[n] = None
        stack += n.all_input_nodes
    values: dict[torch.fx.Node, object] = {}
    try:
        for n in sorted(needed, key=_position(node.graph)):
            args = torch.fx.node.map_arg(n.args, values.__getitem__)
            kwargs = torch.fx.node.map_arg(n.kwargs, values.__getitem__)
            if "device" in kwargs:
                kwargs = {**kwargs, "device": "cpu"}
            values[n] = n.target(*args, **kwargs)
    except Exception:   # noqa: BLE001 - an op that does not run on CPU tensors: not a constant mask
        return None
    value = values[node]
    return value if isinstance(value, torch.Tensor) else None


def _position(graph: torch.fx.Graph) -> Callable[[torch.fx.Node], int]:
    order = {n: i for i, n in enumerate(graph.nodes)}
    return order.__getitem__


def _is_causal_mask(node: torch.fx.Node, kind: str, shape: tuple[int, int, int, int]) -> bool:
    """The mask (bool: True = attend; additive: 0 or -inf/lowest) is a compile-time constant equal to the
    top-left causal mask (key j attends for query i when j <= i, torch's `is_causal`) on every batch and
    head: the kernel applies it itself (no mask read, the keys after the block skipped)."""
    value = _constant_value(node)
    if value is None:
        return False
    try:
        value = value.expand(shape)
    except RuntimeError:
        return False
    if kind == "bool32":
        attend = value
    elif value.dtype.is_floating_point:
        # -inf, or the dtype's lowest value as older masks use: exp() of either is 0 in a row that has
        # a key to attend (every causal row has its diagonal).
        attend = value == 0
        if not bool((attend | (value <= torch.finfo(value.dtype).min)).all()):
            return False
    else:
        return False
    lq, lk = shape[-2:]
    causal = torch.ones(lq, lk, dtype=torch.bool).tril()
    return bool((attend == causal).all())


def attention_matcher(context: MatchContext) -> AttentionMatcher:
    """The graph's attention matcher."""
    return AttentionMatcher(context.order, context.graph_outputs, context.resolver, context.caps)


def match_attention(node: torch.fx.Node, context: MatchContext) -> AttentionOp | None:
    """The library attention starting at the bmm `node`, or None."""
    return context.matcher(attention_matcher).match(node)


FAMILY = Family("attention", frozenset({aten.bmm.default}), match_attention)
