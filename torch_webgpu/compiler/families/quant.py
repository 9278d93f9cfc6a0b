"""The quantized-linear partition family: torchao's weight-only dequantize + matmul as one library op.

torchao's tensor subclasses reach the backend flattened by AOTAutograd into plain aten ops:
- `IntxWeightOnlyConfig` (per-group, `IntxUnpackedToInt8Tensor`):
  W = view((convert(view(q)) - convert(view(zero))) * view(scale), [N, K]); mm(x, permute(W));
- `Int8WeightOnlyConfig` (per-channel, `Int8Tensor`): mul(mm(x, convert(permute(q))), view(scale)).
`match_quant_linear` recognizes both and returns a `QuantLinearOp` (the members every family has:
`roles`, `launch`, `root`, `final`, `absorbed`); the kernel library's quant_matmul reads the int8 bytes
of q, dequantizes in registers and applies the matmul epilogue (bias, activation, residual).
When q, scale and zero are plan constants (bundles: `torch.export` makes weights constants), `repack`
packs int4-ranged weights two per byte at plan-build time; graph inputs (torch.compile passes weights
per call) are read as the int8 bytes torchao stores.
The same configs quantize `nn.Embedding` (ExecuTorch's Llama recipes quantize the token table):
`embedding(dequant(q, scale, zero), ids)` becomes a `QuantEmbeddingOp`, the library's quant_embedding
gathering the rows from the packed table, so a plan never materialises the float table.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch
import torch.fx

from torch_webgpu.kernels import autotune
from torch_webgpu.kernels.launch import DeviceCaps, KernelLaunch
from torch_webgpu.kernels.matmul import Layout
from torch_webgpu.kernels.quant_embedding import QuantEmbeddingProblem, plan_quant_embedding
from torch_webgpu.kernels.quant_matmul import (
    QuantMatmulProblem,
    QuantWeight,
    pack_constant,
    plan_quant_matmul,
    quant_variants,
)

from ..operands import Operand, Tunable, value_of
from .family import Family, MatchContext
from .matmul import LibraryOp, MatmulMatcher, matmul_matcher

aten, prims = torch.ops.aten, torch.ops.prims
_CONVERTS = frozenset({prims.convert_element_type.default, aten._to_copy.default})
_VIEWS = frozenset({aten.view.default, aten._unsafe_view.default, aten.reshape.default})
_TRANSPOSES = frozenset({aten.permute.default, aten.t.default, aten.transpose.int})
_DTYPES = {torch.float32: "f32", torch.float16: "f16"}


@dataclass
class QuantLinearOp(LibraryOp):
    """out = epilogue(alpha * a @ dequant(q, scale, zero)^T): one quant_matmul dispatch (`b` is q)."""

    scale: Any = None
    zero: Any = None
    group: int = 0
    fmt: str = "i8"             # "i4" once `repack` packed a constant q two per byte
    packed_bytes: dict[str, int] = field(default_factory=dict)   # role -> bytes of a repacked constant

    @property
    def q(self) -> Operand:
        """The int8 values of the weight [N, K]."""
        return self.b

    def roles(self) -> dict[str, Any]:
        """Every operand the op reads, by its binding role in the library's launch."""
        roles = {"a": self.a, "q": self.q, "scale": self.scale, "zero": self.zero, "bias": self.bias,
                 "residual": self.residual}
        return {role: o for role, o in roles.items() if o is not None}

    def operands(self) -> list[Any]:
        """Every operand the op reads."""
        return list(self.roles().values())

    def binding_bytes(self, role: str) -> int | None:
        """The bytes bound for `role` when it is not the operand's tensor as stored (a repacked constant)."""
        return self.packed_bytes.get(role)

    def problem(self) -> QuantMatmulProblem:
        """The kernel library's problem of this op."""
        shape_o = (1, self.m, self.n)
        scale_dtype = _DTYPES[_val(self.scale.base).dtype]
        return QuantMatmulProblem(
            self.m, self.n, self.k, _2d(self.a.layout((1, self.m, self.k))), Layout(0, 0, self.n, 1),
            QuantWeight(self.fmt, self.group, self.zero is not None, scale_dtype), self.dtype,
            bias=_2d(self.bias.layout(shape_o)) if self.bias else None,
            residual=_2d(self.residual.layout(shape_o)) if self.residual else None,
            activation=self.activation, alpha=self.alpha, beta=self.beta,
            a_dtype=_DTYPES[_val(self.a.base).dtype])

    def launch(self, caps: DeviceCaps) -> KernelLaunch:
        """The library's launch of this op on `caps` (its default variant there)."""
        return plan_quant_matmul(self.problem(), caps)

    def candidates(self, caps: DeviceCaps) -> Tunable:
        """The variants the machine that runs the plan times once (the default first)."""
        p = self.problem()
        names = quant_variants(p, caps)[:autotune.MAX_CANDIDATES]
        return Tunable.of("quant_matmul", p, [plan_quant_matmul(p, caps, v) for v in names])


@dataclass
class QuantEmbeddingOp:
    """out[..., :] = dequant(q, scale, zero)[ids, :]: one quant_embedding dispatch over the table [n, k]."""

    root: torch.fx.Node
    final: torch.fx.Node
    absorbed: list[torch.fx.Node]
    n: int                      # table rows (vocabulary)
    k: int                      # row length (embedding dim)
    count: int                  # ids gathered
    dtype: str
    ids: Operand
    q: Operand
    scale: Operand
    zero: Operand | None
    group: int
    fmt: str = "i8"
    packed_bytes: dict[str, int] = field(default_factory=dict)

    def roles(self) -> dict[str, Any]:
        """Every operand the op reads, by its binding role in the library's launch."""
        roles = {"ids": self.ids, "q": self.q, "scale": self.scale, "zero": self.zero}
        return {role: o for role, o in roles.items() if o is not None}

    def operands(self) -> list[Any]:
        """Every operand the op reads."""
        return list(self.roles().values())

    def binding_bytes(self, role: str) -> int | None:
        """The bytes bound for `role` when it is not the operand's tensor as stored (a repacked constant)."""
        return self.packed_bytes.get(role)

    def problem(self) -> QuantEmbeddingProblem:
        """The kernel library's problem of this op (plans hold int64 ids as int32)."""
        scale_dtype = _DTYPES[_val(self.scale.base).dtype]
        weight = QuantWeight(self.fmt, self.group, self.zero is not None, scale_dtype)
        return QuantEmbeddingProblem(self.n, self.k, self.count, weight, self.dtype,
                                     ids_offset=int(self.ids.view.storage_offset()), ids_words=1)

    def launch(self, caps: DeviceCaps) -> KernelLaunch:
        """The library's launch of this op on `caps`."""
        return plan_quant_embedding(self.problem(), caps)


_IDS = frozenset({torch.int64, torch.int32})


def match_quant_embedding(root: torch.fx.Node, matcher: MatmulMatcher) -> QuantEmbeddingOp | None:
    """The quantized-table embedding rooted at `root` (an aten.embedding), or None."""
    if root.target is not aten.embedding.default:
        return None
    resolver = matcher.resolver
    w_node, ids_node = root.args[:2]
    val, ids_val = _val(root), _val(ids_node)
    if not (isinstance(val, torch.Tensor) and isinstance(ids_val, torch.Tensor)) or ids_val.dtype not in _IDS:
        return None
    dtype = _DTYPES.get(val.dtype)
    if dtype is None or dtype == "f16" and not matcher.shader_f16 or ids_val.numel() == 0:
        return None
    base: list[torch.fx.Node] = []
    w = w_node
    # torchao's Int8Tensor of an f16 table: (q - zero) in f16 times its f32 scale, cast to f16 (the
    # kernel's f32 product rounded once is the same value)
    while _call(w, _CONVERTS) and _single_use(w) and _val(w.args[0]) is not None and (
            _val(w.args[0]).dtype in _DTYPES):
        base.append(w)
        w = w.args[0]
    if not isinstance(_val(w), torch.Tensor) or _val(w).dim() != 2:
        return None
    found = None
    for inner in dict.fromkeys((_val(w).dtype, val.dtype)):   # the dtype (q - zero) is computed in
        chain = list(base)
        found = _dequant_per_group(w, resolver, inner, chain)
        if found is not None:
            break
    if found is None:
        return None
    q, scale, zero, group = found
    ids = resolver.resolve(ids_node)
    if ids is None or not ids.view.is_contiguous():
        return None
    if any(_depends_on(o.base, root) for o in (q, scale, zero) if o is not None):
        return None
    n, k = (int(d) for d in _val(w).shape)
    op = QuantEmbeddingOp(root, root, [], n, k, int(ids_val.numel()), dtype, ids, q, scale, zero, group)
    if op.zero is not None and (n * (k // group)) % 4:
        return None   # zero points bind as whole u32 words
    if _val(scale.base).dtype == torch.float16 and (n * (k // group)) % 2:
        return None
    try:
        op.launch(matcher.caps)
    except (ValueError, TypeError):
        return None
    op.absorbed += [c for c in chain if c.target not in _VIEWS and c.target not in _TRANSPOSES]
    weight_nodes = [x for o in (q, scale, zero) if o is not None for x in _view_closure(o.base)]
    op.absorbed += [c for x in chain + weight_nodes for c in _checks(x) if c not in op.absorbed]
    return op


def _2d(lay: Layout) -> Layout:
    return replace(lay, batch_stride=0)


_val = value_of


def _call(node: Any, targets: frozenset) -> bool:
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target in targets


_CHECKS = frozenset({aten._assert_tensor_metadata.default})   # torch.export's no-op dtype checks


def _checks(node: torch.fx.Node) -> list[torch.fx.Node]:
    return [u for u in node.users if u.op == "call_function" and u.target in _CHECKS]


def _single_use(node: torch.fx.Node) -> bool:
    """One real user (torch.export's metadata assertions on the value do not count)."""
    return len(node.users) - len(_checks(node)) == 1


def _strip(node: Any, targets: frozenset, chain: list) -> Any:
    while _call(node, targets) and _single_use(node):
        chain.append(node)
        node = node.args[0]
    return node


def _plain_int8(node: Any, resolver: Any, shape: tuple[int, ...]) -> Any:
    """The operand of an int8 value stored contiguously as `shape` from offset 0 (through views), or None."""
    val = _val(node)
    if not isinstance(val, torch.Tensor) or val.dtype != torch.int8 or val.numel() != int(np.prod(shape)):
        return None
    operand = resolver.resolve(node)
    if operand is None or not operand.view.is_contiguous() or operand.view.storage_offset() != 0:
        return None
    if _val(operand.base).numel() != val.numel():
        return None
    return operand


def _dequant_per_group(w: Any, resolver: Any, dtype: torch.dtype, chain: list) -> tuple | None:
    """(q, scale, zero, group) of W [N, K] = view((convert(q) - convert(zero)) * scale), or None."""
    wv = _val(w)
    if not isinstance(wv, torch.Tensor) or wv.dim() != 2:
        return None
    n, k = wv.shape
    node = w
    if _call(node, _VIEWS) and _single_use(node):
        chain.append(node)
        node = node.args[0]
    if not _call(node, frozenset({aten.mul.Tensor})) or not _single_use(node):
        return None
    chain.append(node)
    x, s = node.args
    if _val(s) is not None and _val(s).dtype == torch.int8:
        return None
    if not (_call(x, frozenset({aten.sub.Tensor})) or _call(x, _CONVERTS)):
        x, s = s, x
    shaped = _val(x)
    if not isinstance(shaped, torch.Tensor) or shaped.numel() != n * k or shaped.dtype != dtype:
        return None
    if shaped.dim() == 3:
        groups, group = int(shaped.shape[1]), int(shaped.shape[2])
    elif shaped.dim() == 2:
        groups, group = 1, int(k)
    else:
        return None
    if int(shaped.shape[0]) != n or groups * group != k:
        return None
    zero = None
    if _call(x, frozenset({aten.sub.Tensor})) and _single_use(x) and x.kwargs.get("alpha", 1) == 1:
        chain.append(x)
        x, z = x.args
        if not _call(z, _CONVERTS) or not _single_use(z):
            return None
        chain.append(z)
        zero = _plain_int8(z.args[0], resolver, (n, groups))
        if zero is None:
            return None
    if not _call(x, _CONVERTS) or not _single_use(x):
        return None
    chain.append(x)
    q = _plain_int8(x.args[0], resolver, (n, k))
    sv = _val(s)
    if q is None or not isinstance(sv, torch.Tensor) or sv.dtype not in _DTYPES or sv.numel() != n * groups:
        return None
    scale = resolver.resolve(s)
    if scale is None or not scale.view.is_contiguous() or scale.view.storage_offset() != 0 or (
            _val(scale.base).numel() != n * groups):
        return None
    return q, scale, zero, group


def match_quant_linear(root: torch.fx.Node, matcher: MatmulMatcher) -> QuantLinearOp | None:
    """The quantized linear rooted at `root` (an aten.mm), or None; `matcher`: the matmul family's
    (operand resolution and the matmul epilogue)."""
    if root.target is not aten.mm.default:
        return None
    resolver = matcher.resolver
    a_node, b_node = root.args[:2]
    val, a_val = _val(root), _val(a_node)
    if not isinstance(val, torch.Tensor) or not isinstance(a_val, torch.Tensor):
        return None
    dtype = _DTYPES.get(val.dtype)
    chain: list[torch.fx.Node] = []
    if _call(a_node, _CONVERTS) and val.dtype == torch.float32 and (
            _val(a_node.args[0]) is not None and _val(a_node.args[0]).dtype == torch.float16):
        # f16 linears decompose to f32 matmuls of upcast operands: the kernel reads the f16 activations
        if _single_use(a_node):
            chain.append(a_node)
        a_node = a_node.args[0]
        a_val = _val(a_node)
    if dtype is None or a_val.dtype not in _DTYPES or not matcher.shader_f16 and (
            torch.float16 in (a_val.dtype, val.dtype)):
        return None
    m, k = (int(d) for d in a_val.shape)
    n = int(val.shape[1])
    b_chain: list[torch.fx.Node] = []
    b = _strip(b_node, _TRANSPOSES | _CONVERTS, b_chain)
    per_channel_scale = None
    if b_chain and any(_call(c, _CONVERTS) for c in b_chain) and _val(b) is not None and (
            _val(b).dtype == torch.int8):
        # Int8WeightOnlyConfig: convert(permute(q)); the scale multiplies the product
        found = None
        if _single_use(root):
            (user,) = root.users
            if user.target is aten.mul.Tensor and len(user.args) == 2 and user.args[0] is root:
                found = user
        if found is None:
            return None
        q = _plain_int8(b, resolver, (n, k))
        s = found.args[1]
        sv = _val(s)
        if q is None or not isinstance(sv, torch.Tensor) or sv.dtype not in _DTYPES or sv.numel() != n or (
                tuple(sv.shape)[-1:] != (n,)):
            return None
        scale = resolver.resolve(s)
        if scale is None or not scale.view.is_contiguous() or scale.view.storage_offset() != 0 or (
                _val(scale.base).numel() != n):
            return None
        zero, group, per_channel_scale = None, k, found
    else:
        if [c for c in b_chain if _call(c, _TRANSPOSES)] != b_chain[-1:] or len(b_chain) > 2:
            return None   # permute(W), or convert(permute(W)) of an f16 W
        w_dtype = _val(b).dtype if isinstance(_val(b), torch.Tensor) else None
        found = _dequant_per_group(b, resolver, w_dtype, b_chain)
        if found is None:
            return None
        q, scale, zero, group = found
    a = resolver.resolve(a_node, scalable=True)
    if a is None:
        return None
    op = QuantLinearOp(root, root, [], 1, m, n, k, dtype, a, q, alpha=a.scale, scale=scale, zero=zero,
                       group=group)
    try:
        op.a.layout((1, m, k))
    except ValueError:
        return None
    if any(_depends_on(o.base, root) for o in (q, scale, zero) if o is not None):
        return None   # weights are computed before the op (a segment may place them after it in the graph)
    chain += b_chain
    op.absorbed += [c for c in chain if c.target not in _VIEWS and c.target not in _TRANSPOSES]
    # assertions on the weights and their views would make IREE read int8 tensors: dropped with them
    weight_nodes = [n for o in (q, scale, zero) if o is not None for n in _view_closure(o.base)]
    op.absorbed += [c for n in chain + weight_nodes for c in _checks(n) if c not in op.absorbed]
    if per_channel_scale is not None:
        # the epilogue continues after the scale multiplication, which the kernel applies per group
        op.final = per_channel_scale
        op.root = per_channel_scale
        matcher._epilogue(op)
        op.root = root
        if op.final is not per_channel_scale:
            op.absorbed.append(per_channel_scale)
    else:
        matcher._epilogue(op)
    try:
        op.launch(matcher.caps)
    except (ValueError, TypeError):
        return None
    if op.zero is not None and (n * (k // group)) % 4:
        return None   # zero points bind as whole u32 words
    if _val(scale.base).dtype == torch.float16 and (n * (k // group)) % 2:
        return None
    return op


def _view_closure(node: torch.fx.Node) -> list[torch.fx.Node]:
    """`node` and the views of it (through views and transposes)."""
    out, frontier = [], [node]
    while frontier:
        x = frontier.pop()
        out.append(x)
        frontier += [u for u in x.users if u.target in _VIEWS or u.target in _TRANSPOSES]
    return out


def _depends_on(node: torch.fx.Node, root: torch.fx.Node) -> bool:
    """`node` is `root` or computed from it."""
    seen, frontier = set(), [node]
    while frontier:
        x = frontier.pop()
        if x is root:
            return True
        if x not in seen:
            seen.add(x)
            frontier += x.all_input_nodes
    return False


def repack(ops: list, constant_placeholders: list[torch.fx.Node],
           constants: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, dict]]:
    """`constants` with the q / scale / zero constants that only quantized linears read packed for the
    kernel (int4-ranged q two per byte), and how each packed one was made from the original
    ({"pack": "i4" | "i8" | "bytes" | "scales", "shape": [N, K] of a weight}: a loader given the original
    weights applies `pack_constant`); updates each op's format and bound sizes."""
    names = {ph: name for ph, name in zip(constant_placeholders, constants, strict=True)}
    quant = [op for op in ops if isinstance(op, (QuantLinearOp, QuantEmbeddingOp))]
    readers: dict[torch.fx.Node, set[str]] = {}
    for op in quant:
        for role, operand in op.roles().items():
            readers.setdefault(operand.base, set()).add(role)
    inside = {x for op in quant for x in (op.root, op.final, *op.absorbed)}
    out = dict(constants)
    how: dict[str, dict] = {}
    for op in quant:
        for role in ("q", "scale", "zero"):
            operand = op.roles().get(role)
            if operand is None or operand.base not in names or readers[operand.base] != {role}:
                continue
            if not all(_feeds_quant(u, inside) for u in operand.base.users):
                continue
            name = names[operand.base]
            value = constants[name]
            if role == "q":
                fits = value.size and int(value.min()) >= -8 and int(value.max()) <= 7
                how[name] = {"pack": "i4" if fits else "i8", "shape": [op.n, op.k]}
                users = [o for o in quant if o.q.base is operand.base]
                for o in users:
                    o.fmt = how[name]["pack"]
            else:
                how[name] = {"pack": "bytes" if role == "zero" else "scales"}
            packed = pack_constant(value, how[name])
            out[name] = packed
            for o in quant:
                if o.roles().get(role) is not None and o.roles()[role].base is operand.base:
                    o.packed_bytes[role] = int(packed.nbytes)
    return out, how




def _feeds_quant(node: torch.fx.Node, inside: set[torch.fx.Node]) -> bool:
    """`node` reaches a quantized linear's own nodes through single-use views and conversions only."""
    if node in inside:
        return True
    while _single_use(node) and (
            node.target in _VIEWS or node.target in _TRANSPOSES or node.target in _CONVERTS):
        (node,) = [u for u in node.users if u.target not in _CHECKS]
        if node in inside:
            return True
    return False


def match_quant(node: torch.fx.Node, context: MatchContext) -> QuantLinearOp | QuantEmbeddingOp | None:
    """The quantized linear rooted at the mm `node`, or the quantized-table embedding at the embedding
    `node` (float tables go to IREE), or None."""
    matcher = context.matcher(matmul_matcher)
    if node.target is aten.embedding.default:
        return match_quant_embedding(node, matcher)
    return match_quant_linear(node, matcher)


FAMILY = Family("quant", frozenset({aten.mm.default, aten.embedding.default}), match_quant)
