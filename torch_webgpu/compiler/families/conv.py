"""The convolution family of the partitioner: `aten.convolution` (1-d and 2-d, strided, padded, dilated,
grouped, depthwise, transposed) with its epilogue as one kernel-library dispatch (kernels/conv.py).

The epilogue absorbed, in the kernel's order: the convolution's bias, a per-channel `* scale + shift`
(eval-mode batch norm: `fold_channel_affine` rewrites its decomposed `(v - mean) * invstd * gamma + beta`
into one scale and one shift computed from the parameters by IREE, so the running statistics stay plan
inputs and an update to them is seen), a residual add, an activation (or the residual after it). An
explicit zero padding that `crop_conv_padding` put in front of a strided convolution is read through the
kernel's bounds checks instead of being materialized.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch
import torch.fx

from torch_webgpu.kernels import autotune
from torch_webgpu.kernels.conv import Conv2dProblem, Strided1, Strided4, plan_conv2d, variants
from torch_webgpu.kernels.launch import DeviceCaps, KernelLaunch

from ..operands import Operand, Resolver, Tunable, add_operand, broadcast_operand, value_of
from .family import Family, MatchContext

aten = torch.ops.aten
CONVOLUTIONS = frozenset({aten.convolution.default})
ACTIVATIONS = {aten.relu.default: "relu", aten.silu.default: "silu", aten.sigmoid.default: "sigmoid",
               aten.tanh.default: "tanh"}
_DTYPES = {torch.float32: "f32", torch.float16: "f16"}
_AFFINE = frozenset({aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.div.Tensor})


@dataclass
class ConvOp:
    """One library convolution and its absorbed epilogue; `final`: the node whose value it writes."""

    root: torch.fx.Node
    final: torch.fx.Node
    absorbed: list[torch.fx.Node]
    problem: Conv2dProblem          # geometry, dtype and activation (layouts filled in by `launch`)
    nd: int                         # 1 or 2 spatial dims (1-d runs as H = 1)
    x: Operand
    weight: Operand
    bias: Operand | None = None
    scale: Operand | None = None
    shift: Operand | None = None
    residual: Operand | None = None
    mean: Operand | None = None     # with var: batch norm from the running statistics (scale = gamma)
    var: Operand | None = None
    epilogue_shape: tuple[int, ...] = field(default=())

    def roles(self) -> dict[str, Operand]:
        """Every operand the op reads, by its binding role in the library's launch."""
        roles = {"x": self.x, "weight": self.weight, "bias": self.bias, "scale": self.scale,
                 "shift": self.shift, "residual": self.residual, "mean": self.mean, "var": self.var}
        return {role: o for role, o in roles.items() if o is not None}

    def operands(self) -> list[Operand]:
        """Every operand the op reads."""
        return list(self.roles().values())

    def full_problem(self) -> Conv2dProblem:
        """The library problem with the operands' layouts."""
        channel = {role: _strided1(o) for role, o in (("bias", self.bias), ("scale", self.scale),
                                                       ("shift", self.shift), ("mean", self.mean),
                                                       ("var", self.var)) if o is not None}
        return replace(self.problem, x=_strided4(self.x.view, self.nd, self.problem.kw),
                       weight=_strided4(self.weight.view, self.nd, self.problem.kw),
                       residual=_strided4(self.residual.view, self.nd, 0) if self.residual else None,
                       **channel)

    def launch(self, caps: DeviceCaps) -> KernelLaunch:
        """The library's launch of this op on `caps` (the plan's default variant)."""
        p = self.full_problem()
        return plan_conv2d(p, caps, _plan_order(p, caps)[0])

    def candidates(self, caps: DeviceCaps) -> Tunable:
        """The variants the machine that runs the plan times once (the default first)."""
        p = self.full_problem()
        names = _plan_order(p, caps)[:autotune.MAX_CANDIDATES]
        return Tunable.of("conv2d", p, [plan_conv2d(p, caps, v) for v in names])


def _plan_order(p: Conv2dProblem, caps: DeviceCaps) -> list[str]:
    """A plan's variants, default first. Hardware adapters time them where the plan loads, software ones
    (which do not tune) run the default: so it is the variant that compiles fastest on a software adapter
    (the big tile; lavapipe compiles the K-split tiles several times slower), then the device's order."""
    names = variants(p, caps)
    fast = variants(p, replace(caps, architecture="software"))[0]
    return [fast] + [n for n in names if n != fast]


def _strided4(view: torch.Tensor, nd: int, kw: int) -> Strided4:
    """The NCHW layout of a meta view (a 1-d [n, c, l] one as [n, c, 1, l]: its h stride is never
    stepped; `kw` * w-stride lets the kernel flatten a weight's (ci, r, s) index)."""
    strides = tuple(int(s) for s in view.stride())
    if nd == 1:
        strides = (strides[0], strides[1], kw * strides[2], strides[2])
    return Strided4(int(view.storage_offset()), strides)  # type: ignore[arg-type]


def _strided1(operand: Operand) -> Strided1:
    view = operand.view
    stride = view.stride(1) if view.dim() > 1 else view.stride(0)
    return Strided1(int(view.storage_offset()), int(stride))


def _channel_only(shape: tuple[int, ...], out_dims: int) -> bool:
    """A shape that broadcast to an [n, c, *spatial] value varies along the channel dim only."""
    if len(shape) > out_dims:
        return False
    padded = (1,) * (out_dims - len(shape)) + tuple(shape)
    return all(d == 1 for i, d in enumerate(padded) if i != 1)


def _moved_before(node: torch.fx.Node, anchor: torch.fx.Node, order: dict[torch.fx.Node, int]
                  ) -> list[torch.fx.Node] | None:
    """The ancestors of `node` (itself included) after `anchor` in graph order, to move in front of it;
    None when `node` depends on `anchor`."""
    found: set[torch.fx.Node] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if n is anchor:
            return None
        if n in found or order[n] < order[anchor]:
            continue
        found.add(n)
        stack.extend(n.all_input_nodes)
    return sorted(found, key=order.__getitem__)


def _affine_step(user: torch.fx.Node, cur: torch.fx.Node) -> tuple[str, torch.fx.Node] | None:
    """(op, per-channel operand) when `user` is cur +-*/ a value broadcast along the channel dim."""
    if user.op != "call_function" or user.target not in _AFFINE or len(user.args) != 2:
        return None
    if user.kwargs.get("alpha", 1) != 1:
        return None
    x, y = user.args
    other = y if x is cur else x if y is cur and user.target in (aten.add.Tensor, aten.mul.Tensor) else None
    if not isinstance(other, torch.fx.Node) or other is cur:
        return None
    ov, cv, uv = value_of(other), value_of(cur), value_of(user)
    if not all(isinstance(v, torch.Tensor) for v in (ov, cv, uv)) or ov.dtype != cv.dtype or (
            tuple(uv.shape) != tuple(cv.shape)) or not _channel_only(tuple(ov.shape), cv.dim()):
        return None
    return {aten.add.Tensor: "add", aten.sub.Tensor: "sub", aten.mul.Tensor: "mul",
            aten.div.Tensor: "div"}[user.target], other


def _noop_convert(node: object) -> bool:
    """A `convert_element_type` to the dtype its input already has (batch norm's statistics)."""
    if not (isinstance(node, torch.fx.Node) and node.op == "call_function"
            and node.target is torch.ops.prims.convert_element_type.default):
        return False
    src = node.args[0]
    return isinstance(src, torch.fx.Node) and isinstance(value_of(src), torch.Tensor) and (
        value_of(src).dtype == value_of(node).dtype)


def _unaliased(node: torch.fx.Node) -> torch.fx.Node:
    """`node` through unsqueeze/view aliases and no-op converts."""
    while isinstance(node, torch.fx.Node) and node.op == "call_function" and (
            node.target in (aten.unsqueeze.default, aten.view.default) or _noop_convert(node)):
        node = node.args[0]
    return node


@dataclass
class BatchNormChain:
    """`(v - mean) * invstd * gamma + beta` after a convolution with invstd = 1 / sqrt(var + eps)."""

    nodes: list[torch.fx.Node]        # sub, mul, mul, add (the last one's value is the result)
    mean: torch.fx.Node
    var: torch.fx.Node
    eps: float
    gamma: torch.fx.Node
    beta: torch.fx.Node
    invstd: list[torch.fx.Node]       # the nodes computing invstd from var (only this chain reads them)


def batch_norm_chain(cur: torch.fx.Node) -> BatchNormChain | None:
    """The eval batch norm that `cur` feeds, as the backend's decompositions write it, or None."""
    steps, node = [], cur
    for _ in range(4):
        if len(node.users) != 1:
            return None
        (user,) = node.users
        step = _affine_step(user, node)
        if step is None:
            return None
        steps.append((user, *step))
        node = user
    if [k for _, k, _ in steps] != ["sub", "mul", "mul", "add"]:
        return None
    mean, invstd, gamma, beta = (c for _, _, c in steps)
    chain, x = [], _unaliased(invstd)
    if not isinstance(x, torch.fx.Node) or x.op != "call_function":
        return None
    if x.target in (aten.mul.Tensor, aten.mul.Scalar) and len(x.args) == 2 and x.args[1] == 1:
        chain.append(x)
        x = x.args[0]
    if x.target is aten.rsqrt.default:
        chain.append(x)
        x = x.args[0]
    elif x.target is aten.reciprocal.default and isinstance(x.args[0], torch.fx.Node) and (
            x.args[0].target is aten.sqrt.default):
        chain += [x, x.args[0]]
        x = x.args[0].args[0]
    else:
        return None
    if not isinstance(x, torch.fx.Node) or x.target is not aten.add.Tensor or len(x.args) != 2 or (
            not isinstance(x.args[1], (int, float))):
        return None
    chain.append(x)
    var = _unaliased(x.args[0])
    vectors = [_unaliased(n) for n in (mean, gamma, beta)] + [var]
    cout = value_of(cur).shape[1]
    if not all(isinstance(value_of(v), torch.Tensor) and tuple(value_of(v).shape) == (cout,)
               for v in vectors):
        return None
    invstd_only = all(len(n.users) == 1 for n in chain)
    return BatchNormChain([u for u, _, _ in steps], vectors[0], var, float(x.args[1]), vectors[1], vectors[2],
                          chain if invstd_only else [])


def fold_channel_affine(graph: torch.fx.Graph) -> None:
    """Prepare each convolution's epilogue for the library: a chain of per-channel +, -, *, / (eval batch
    norm) becomes `conv * scale + shift` with scale and shift computed from the per-channel operands, and
    the values its epilogue reads that do not depend on it (those operands, a residual branch computed
    later in graph order) move in front of it."""
    for conv in [n for n in graph.nodes if n.op == "call_function" and n.target in CONVOLUTIONS]:
        order = {n: i for i, n in enumerate(graph.nodes)}
        steps, cur = [], conv
        while len(cur.users) == 1:
            (user,) = cur.users
            step = _affine_step(user, cur)
            if step is None or _moved_before(step[1], conv, order) is None:
                break
            steps.append((user, *step))
            cur = user
        kinds = [k for _, k, _ in steps]
        bn = batch_norm_chain(conv)   # the kernel computes this one from the statistics themselves
        if bn is None and steps and kinds not in (["add"], ["mul", "add"]) and (
                "add" in kinds or "sub" in kinds):
            _fold(graph, conv, steps)
        order = {n: i for i, n in enumerate(graph.nodes)}
        cur = conv
        # The epilogue's other operands: per-channel vectors and a residual, until the chain ends.
        while len(cur.users) == 1 and cur.users and next(iter(cur.users)).op == "call_function":
            (user,) = cur.users
            others = [x for x in user.all_input_nodes if x is not cur]
            if user.target not in _AFFINE and user.target not in ACTIVATIONS and (
                    user.target is not aten.gelu.default):
                break
            if bn is not None and user in bn.nodes:
                others = [bn.mean, bn.var, bn.gamma, bn.beta]
            for other in others:
                moved = _moved_before(other, conv, order)
                for n in moved or []:
                    conv.prepend(n)
            order = {n: i for i, n in enumerate(graph.nodes)}
            cur = user


def _fold(graph: torch.fx.Graph, conv: torch.fx.Node, steps: list) -> torch.fx.Node:
    """Replace the chain `steps` [(node, op, operand)] after `conv` by `conv * scale + shift`."""
    fake_mode = value_of(conv).fake_mode
    last = steps[-1][0]

    def emit(target, *args):
        with graph.inserting_before(last), fake_mode:
            node = graph.call_function(target, args)
            node.meta["val"] = target(*[value_of(a) if isinstance(a, torch.fx.Node) else a for a in args])
        return node

    scale = shift = None
    for _, kind, c in steps:
        if kind == "add":
            shift = c if shift is None else emit(aten.add.Tensor, shift, c)
        elif kind == "sub":
            shift = emit(aten.neg.default, c) if shift is None else emit(aten.sub.Tensor, shift, c)
        else:
            target = aten.mul.Tensor if kind == "mul" else aten.div.Tensor
            if scale is None:
                scale = c if kind == "mul" else emit(aten.reciprocal.default, c)
            else:
                scale = emit(target, scale, c)
            shift = None if shift is None else emit(target, shift, c)
    value = conv
    for target, operand in ((aten.mul.Tensor, scale), (aten.add.Tensor, shift)):
        if operand is not None:
            value = emit(target, value, operand)
    last.replace_all_uses_with(value)
    for user, _, _ in reversed(steps):
        graph.erase_node(user)
    return value


def _decomposed_silu(cur: torch.fx.Node) -> tuple[torch.fx.Node, torch.fx.Node] | None:
    """(sigmoid, product) when cur's only users are `cur * sigmoid(cur)` (SiLU after decompositions)."""
    if len(cur.users) != 2:
        return None
    sigmoid = next((u for u in cur.users if u.target is aten.sigmoid.default and len(u.users) == 1), None)
    if sigmoid is None:
        return None
    (product,) = sigmoid.users
    if product.target is not aten.mul.Tensor or set(product.args) != {cur, sigmoid} or (
            product not in cur.users):
        return None
    return sigmoid, product


class ConvMatcher:
    """Matches `aten.convolution` roots and their epilogues (see the module doc)."""

    def __init__(self, order: dict[torch.fx.Node, int], graph_outputs: set[torch.fx.Node],
                 resolver: Resolver, caps: DeviceCaps):
        self.order, self.graph_outputs, self.resolver, self.caps = order, graph_outputs, resolver, caps

    def match(self, root: torch.fx.Node) -> ConvOp | None:
        """The library op of convolution `root`, or None (IREE compiles it)."""
        x, w, bias, stride, padding, dilation, transposed, output_padding, groups = root.args
        val, xv, wv = value_of(root), value_of(x), value_of(w)
        if not all(isinstance(v, torch.Tensor) for v in (val, xv, wv)) or xv.dim() not in (3, 4) or (
                wv.dim() != xv.dim()) or val.numel() == 0 or xv.numel() == 0:
            return None
        dtype = _DTYPES.get(val.dtype)
        if dtype is None or xv.dtype != val.dtype or wv.dtype != val.dtype or (
                dtype == "f16" and not self.caps.shader_f16):
            return None
        nd = xv.dim() - 2
        absorbed: list[torch.fx.Node] = []
        padding = list(padding)
        if not transposed and not any(padding):
            x, padding = self._read_through_padding(root, x, nd, absorbed)
            xv = value_of(x)
        xo, wo = self.resolver.resolve(x), self.resolver.resolve(w)
        if xo is None or wo is None:
            return None

        def pair(v, fill: int) -> tuple[int, int]:
            v = [int(a) for a in v]
            return (fill, v[0]) if nd == 1 else (v[0], v[1])

        geometry = dict(stride=pair(stride, 1), padding=pair(padding, 0), dilation=pair(dilation, 1),
                        groups=int(groups), transposed=bool(transposed))
        if transposed:
            geometry["output_padding"] = pair(output_padding, 0)
        spatial_x = (1, int(xv.shape[2])) if nd == 1 else (int(xv.shape[2]), int(xv.shape[3]))
        spatial_w = (1, int(wv.shape[2])) if nd == 1 else (int(wv.shape[2]), int(wv.shape[3]))
        cout = int(wv.shape[1]) * int(groups) if transposed else int(wv.shape[0])
        problem = Conv2dProblem(int(xv.shape[0]), int(xv.shape[1]), *spatial_x, cout, *spatial_w,
                                dtype=dtype, **geometry)
        try:
            problem.check()
        except (ValueError, TypeError):
            return None
        out_spatial = (problem.ow,) if nd == 1 else (problem.oh, problem.ow)
        if tuple(val.shape) != (problem.n, problem.cout, *out_spatial):
            return None
        op = ConvOp(root, root, absorbed, problem, nd, xo, wo, epilogue_shape=tuple(val.shape))
        if bias is not None:
            op.bias = self._channel_operand(op, bias, root, from_conv=True)
            if op.bias is None:
                return None
        self._epilogue(op)
        try:
            launch = op.launch(self.caps)
        except (ValueError, TypeError):
            return None
        if max(launch.grid) > self.caps.limit("max-compute-workgroups-per-dimension", 65535):
            return None
        return op

    def _read_through_padding(self, root: torch.fx.Node, x: torch.fx.Node, nd: int,
                              absorbed: list[torch.fx.Node]) -> tuple[torch.fx.Node, list[int]]:
        """(input, padding): a zero `constant_pad_nd` in front of the convolution whose low side pads at
        least as much as its high side is read as the convolution's own padding (the kernel reads zeros
        past the input's end, and the output size check in `match` keeps the windows the same)."""
        zero = [0] * nd
        if not (isinstance(x, torch.fx.Node) and x.op == "call_function"
                and x.target is aten.constant_pad_nd.default and len(x.users) == 1
                and x not in self.graph_outputs):
            return x, zero
        pads = list(x.args[1])
        value = x.args[2] if len(x.args) > 2 else x.kwargs.get("value", 0)
        if value != 0 or len(pads) != 2 * nd or min(pads) < 0:
            return x, zero
        # pads run from the last dim: [w_lo, w_hi, h_lo, h_hi]
        lows, highs = pads[0::2][::-1], pads[1::2][::-1]
        if any(hi > lo for lo, hi in zip(lows, highs, strict=True)):
            return x, zero
        absorbed.append(x)
        return x.args[0], lows

    def _precedes(self, operand: Operand, root: torch.fx.Node) -> bool:
        return self.order[operand.base] < self.order[root]

    def _channel_operand(self, op: ConvOp, other: torch.fx.Node, cur: torch.fx.Node,
                         from_conv: bool = False) -> Operand | None:
        """`other` as a per-channel epilogue vector (a conv bias [cout], or a value broadcast along the
        channel dim of `cur`), or None."""
        ov, cv = value_of(other), value_of(cur)
        if not isinstance(ov, torch.Tensor) or ov.dtype != cv.dtype:
            return None
        if from_conv:
            if tuple(ov.shape) != (op.problem.cout,):
                return None
        elif not _channel_only(tuple(ov.shape), cv.dim()):
            return None
        operand = self.resolver.resolve(other)
        if operand is None or not self._precedes(operand, op.root):
            return None
        view = operand.view if from_conv else operand.view.expand(tuple(cv.shape))
        return Operand(operand.base, view)

    def _vector_operand(self, op: ConvOp, node: torch.fx.Node) -> Operand | None:
        """A [cout] vector read as it is (batch norm's statistics and affine parameters)."""
        operand = self.resolver.resolve(node)
        if operand is None or not self._precedes(operand, op.root) or (
                value_of(node).dtype != value_of(op.root).dtype):
            return None
        return operand

    def _residual_operand(self, op: ConvOp, other: torch.fx.Node, cur: torch.fx.Node) -> Operand | None:
        return broadcast_operand(self.resolver, other, cur, lambda o: self._precedes(o, op.root))

    def _epilogue(self, op: ConvOp) -> None:
        p = op.problem
        cur = op.root
        pending_scale: torch.fx.Node | None = None    # a `* scale` waiting for its `+ shift`
        while cur not in self.graph_outputs:
            bn = batch_norm_chain(cur) if op.scale is None and p.activation is None and (
                op.residual is None) else None
            vectors = None if bn is None else [self._vector_operand(op, n)
                                               for n in (bn.mean, bn.var, bn.gamma, bn.beta)]
            if vectors is not None and all(v is not None for v in vectors) and not (
                    set(bn.nodes) & self.graph_outputs):
                op.mean, op.var, op.scale, op.shift = vectors
                p = replace(p, eps=bn.eps)
                op.absorbed += [*([cur] if cur is not op.root else []), *bn.nodes[:-1], *bn.invstd]
                cur = op.final = bn.nodes[-1]
                continue
            silu = _decomposed_silu(cur)
            if silu is not None and p.activation is None and (
                    tuple(value_of(silu[1]).shape) == op.epilogue_shape):
                op.absorbed += [silu[0], *([cur] if cur is not op.root else [])]
                p = replace(p, activation="silu")
                cur = op.final = silu[1]
                continue
            if len(cur.users) != 1:
                break
            (user,) = cur.users
            val = value_of(user)
            if user.op != "call_function" or not isinstance(val, torch.Tensor) or (
                    val.dtype != value_of(cur).dtype or tuple(val.shape) != op.epilogue_shape):
                break
            done = p.activation is not None or op.residual is not None
            other = add_operand(user, cur)
            if user.target is aten.mul.Tensor and not done and op.scale is None and len(user.args) == 2 and (
                    user.args[0] is cur):
                scale = self._channel_operand(op, user.args[1], cur)
                if scale is None or len(user.users) != 1:
                    break
                (after,) = user.users
                shift_node = add_operand(after, user)
                shift = None if shift_node is None else self._channel_operand(op, shift_node, user)
                if shift is None or tuple(value_of(after).shape) != op.epilogue_shape:
                    break
                op.scale, op.shift = scale, shift
                pending_scale = user
                user = after
            elif other is not None and not done and op.scale is None and op.bias is None and (
                    (bias := self._channel_operand(op, other, cur)) is not None):
                op.bias = bias
            elif other is not None and op.residual is None and (
                    (residual := self._residual_operand(op, other, cur)) is not None):
                op.residual = residual
                if p.activation is not None:
                    p = replace(p, residual_after_activation=True)
            elif user.target is aten.hardtanh.default and tuple(user.args[1:]) == (0.0, 6.0) and (
                    p.activation is None):
                p = replace(p, activation="relu6")
            elif user.target in ACTIVATIONS or user.target is aten.gelu.default:
                if p.activation is not None or len(user.args) != 1:
                    break
                approximate = user.kwargs.get("approximate", "none")
                p = replace(p, activation=ACTIVATIONS.get(user.target) or (
                    "gelu" if approximate == "none" else "gelu_tanh"))
            else:
                break
            if cur is not op.root:
                op.absorbed.append(cur)
            if pending_scale is not None:
                op.absorbed.append(pending_scale)
                pending_scale = None
            cur = op.final = user
            if p.residual_after_activation:
                break
        op.problem = p


def prepare_convolutions(gm: torch.fx.GraphModule) -> None:
    """`fold_channel_affine` on a graph with a convolution (the others are left as they are)."""
    if any(n.op == "call_function" and n.target in CONVOLUTIONS for n in gm.graph.nodes):
        fold_channel_affine(gm.graph)
        gm.recompile()


def conv_matcher(context: MatchContext) -> ConvMatcher:
    """The graph's convolution matcher."""
    return ConvMatcher(context.order, context.graph_outputs, context.resolver, context.caps)


def match_conv(node: torch.fx.Node, context: MatchContext) -> ConvOp | None:
    """The library convolution rooted at `node`, or None."""
    return context.matcher(conv_matcher).match(node)


FAMILY = Family("conv", CONVOLUTIONS, match_conv, prepare=prepare_convolutions)
