"""One strided, broadcasting elementwise kernel generated per (formula, dtypes) and launched on operands.

Every input is read through its own sizes/strides/element offset (no contiguous copies); the parameters
live in a small storage buffer:  P = [numel, ndim, out_offset, work_items, shape[8], out_strides[8],
then per input (offset, strides[8]), then the scalar arguments as u32 bit patterns]. Packed outputs
(f16, bf16, int16, int8, uint8, bool) must be contiguous; each invocation writes one whole u32 word.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...kernels.wgsl import PRELUDE, helpers_for
from ...runtime import get_runtime
from .dtypes import DtypeInfo, convert, dtype_info
from .operand import MAX_DIMS, Operand, Split, coalesce, narrow, numel, pack_u32, window_bindings

INPUT_NAMES = "abcdefgh"
WORKGROUP = 256
_HEADER = 4 + 2 * MAX_DIMS


@dataclass(frozen=True)
class Scalar:
    """A scalar kernel argument: WGSL name, compute kind ('f32' | 'i32' | 'bool') and value."""

    name: str
    kind: str
    value: float | int | bool

    def bits(self) -> float | int:
        """The value as packed into the parameter buffer."""
        if self.kind == "f32":
            return float(self.value)
        return int(self.value)

    def words(self) -> list:
        """The u32 words this scalar takes in the parameter buffer (int64 takes two)."""
        if self.kind == "i64":
            v = int(self.value) & 0xFFFFFFFFFFFFFFFF
            return [v & 0xFFFFFFFF, v >> 32]
        return [self.bits()]


def _load_fn(name: str, binding: int, info: DtypeInfo) -> str:
    body = info.load.replace("B[", f"B{binding}[")
    return f"fn load_{name}(i: u32) -> {_wgsl_type(info.kind)} {{ return {body}; }}\n"


def _wgsl_type(kind: str) -> str:
    return {"f32": "f32", "i32": "i32", "bool": "bool", "i64": "vec2<u32>"}[kind]


def _scalar_expr(kind: str, index: int) -> str:
    if kind == "f32":
        return f"bitcast<f32>(P[{index}u])"
    if kind == "i32":
        return f"bitcast<i32>(P[{index}u])"
    if kind == "i64":
        return f"vec2<u32>(P[{index}u], P[{index + 1}u])"
    return f"(P[{index}u] != 0u)"


def generate(expr: str, compute: str, inputs: list[tuple[str, int, DtypeInfo]],
             scalars: list[tuple[str, str]], out: tuple[int, DtypeInfo], nbindings: int, writable: int,
             out_kind: str | None = None, contiguous: bool = False) -> str:
    """WGSL for `out = expr(inputs, scalars)`; `inputs` are (name, binding, dtype) triples.

    `contiguous`: every operand is dense in logical order (after coalescing), so element li of each is
    at its offset + li: no coordinates or strides are computed per element.
    """
    out_binding, out_info = out
    out_kind = out_kind or compute
    lines = ["@group(0) @binding(0) var<storage, read> P: array<u32>;"]
    for b in range(1, nbindings):
        access = "read_write" if b == writable else "read"
        lines.append(f"@group(0) @binding({b}) var<storage, {access}> B{b}: array<u32>;")
    src = "\n".join(lines) + "\n" + PRELUDE + helpers_for(expr)
    for name, binding, info in inputs:
        src += _load_fn(name, binding, info)
    nin = len(inputs)
    sbase = _HEADER + (1 + MAX_DIMS) * nin
    args = []
    for k, (name, _binding, info) in enumerate(inputs):
        base = _HEADER + (1 + MAX_DIMS) * k
        raw = f"load_{name}(P[{base}u] + li)" if contiguous else f"load_{name}(offset_of(&crd, {base}u))"
        args.append(f"  let {name} = {convert(raw, info.kind, compute)};")
    pos = sbase
    for name, kind in scalars:
        args.append(f"  let {name} = {_scalar_expr(kind, pos)};")
        pos += 2 if kind == "i64" else 1
    body = "\n".join(args)
    locate = "" if contiguous else "  var crd = coords(li);\n"
    src += f"""
fn offset_of(c: ptr<function, array<u32, {MAX_DIMS}>>, base: u32) -> u32 {{
  var r = P[base];
  for (var d = 0u; d < P[1]; d++) {{ r += (*c)[d] * P[base + 1u + d]; }}
  return r;
}}
fn coords(li: u32) -> array<u32, {MAX_DIMS}> {{
  var c: array<u32, {MAX_DIMS}>;
  var rem = li;
  for (var d = i32(P[1]) - 1; d >= 0; d--) {{
    let n = P[4u + u32(d)];
    c[d] = rem % n;
    rem = rem / n;
  }}
  return c;
}}
fn value(li: u32) -> {_wgsl_type(out_kind)} {{
{locate}{body}
  return {expr};
}}
fn store_bits(v: {_wgsl_type(out_info.kind)}) -> {"vec2<u32>" if out_info.kind == "i64" else "u32"} {{
  return {out_info.store};
}}
"""
    conv_out = convert("value(li)", out_kind, out_info.kind)
    if not out_info.packed:
        # one element per invocation at its strided offset; int64 stores a u32 pair
        out_index = ("  let o = P[2] + li;" if contiguous
                     else "  var crd = coords(li);\n  let o = P[2] + offset_strides(&crd);")
        store = (f"  let w = store_bits({conv_out});\n  B{out_binding}[2u * o] = w.x;\n"
                 f"  B{out_binding}[2u * o + 1u] = w.y;" if out_info.kind == "i64"
                 else f"  B{out_binding}[o] = store_bits({conv_out});")
        src += f"""
@compute @workgroup_size({WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  let li = gid.x + gid.y * nwg.x * {WORKGROUP}u;
  if (li >= P[3]) {{ return; }}
{out_index}
{store}
}}
fn offset_strides(c: ptr<function, array<u32, {MAX_DIMS}>>) -> u32 {{
  var r = 0u;
  for (var d = 0u; d < P[1]; d++) {{ r += (*c)[d] * P[{4 + MAX_DIMS}u + d]; }}
  return r;
}}
"""
    else:
        per, bits = out_info.per_word, out_info.bits
        src += f"""
@compute @workgroup_size({WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  let t = gid.x + gid.y * nwg.x * {WORKGROUP}u;
  if (t >= P[3]) {{ return; }}
  let w = P[2] / {per}u + t;
  var word = B{out_binding}[w];
  for (var j = 0u; j < {per}u; j++) {{
    let e = w * {per}u + j;
    if (e < P[2] || e - P[2] >= P[0]) {{ continue; }}
    let li = e - P[2];
    word = insertBits(word, store_bits({conv_out}), j * {bits}u, {bits}u);
  }}
  B{out_binding}[w] = word;
}}
"""
    return src


_SOURCES: dict[tuple, str] = {}
_KERNELS: dict[tuple, object] = {}  # (runtime id, source key) -> Kernel: skips re-hashing the WGSL per call


def grid(work: int, workgroup: int = WORKGROUP) -> tuple[int, int, int]:
    """Workgroup counts covering `work` invocations of `workgroup`-wide workgroups (2-D past 65535 groups)."""
    groups = -(-work // workgroup)
    limit = 65535
    if groups <= limit:
        return (groups, 1, 1)
    return (limit, -(-groups // limit), 1)


def launch(op: str, expr: str, compute: str, inputs: list, out: Operand,
           scalars: tuple[Scalar, ...] = (), out_kind: str | None = None) -> None:
    """Record `out[...] = expr(inputs[...], scalars)` over out's shape; inputs already broadcast to it.

    `inputs` are Operands (named a, b, c, ... in order) or (name, Operand) pairs.
    """
    named = [x if isinstance(x, tuple) else (INPUT_NAMES[k], x) for k, x in enumerate(inputs)]
    names = [n for n, _ in named]
    inputs = [x for _, x in named]
    shape = tuple(out.sizes)
    n = numel(shape)
    if n == 0:
        return
    out_info = dtype_info(out.dtype, op)
    in_infos = [dtype_info(x.dtype, op) for x in inputs]
    rt = get_runtime()
    windows = window_bindings(rt, [out, *inputs], written=0)
    if isinstance(windows, Split):
        # Operands wider than one kernel binding: every operand has out's shape, so halve one dim of all
        # (a packed output stays contiguous only when split along its first dim of size > 1).
        d = windows.dim if not out_info.packed else next(k for k, m in enumerate(shape) if m > 1)
        half = shape[d] // 2
        for start, length in ((0, half), (half, shape[d] - half)):
            launch(op, expr, compute, [(nm, narrow(x, d, start, length)) for nm, x in named],
                   narrow(out, d, start, length), scalars, out_kind)
        return
    out, *inputs = windows.operands
    binding_of = [k + 1 for k in windows.slot]   # WGSL binding of each operand (0 is the parameters)
    stride_sets = [tuple(out.strides)] + [tuple(x.strides) for x in inputs]
    cshape, cstrides = coalesce(shape, stride_sets)
    if len(cshape) > MAX_DIMS:
        raise NotImplementedError(f"webgpu: '{op}' supports at most {MAX_DIMS} non-mergeable dims, "
                                  f"got shape {shape}")
    if out_info.packed and cstrides[0] != _row_major(cshape):
        raise NotImplementedError(f"webgpu: '{op}' needs a contiguous {out.dtype} output")
    buffers = windows.bindings
    contiguous = all(st == (1,) for st in cstrides) if cshape else True
    key = (expr, compute, out_kind, tuple((n, b, x.dtype) for n, b, x in zip(names, binding_of[1:], inputs,
                                                                           strict=True)),
           tuple((s.name, s.kind) for s in scalars), out.dtype, len(buffers), contiguous)
    src = _SOURCES.get(key)
    if src is None:
        pairs = [(n, b, i) for n, b, i in zip(names, binding_of[1:], in_infos, strict=True)]
        src = generate(expr, compute, pairs,
                       [(s.name, s.kind) for s in scalars], (1, out_info), len(buffers) + 1, 1, out_kind,
                       contiguous)
        _SOURCES[key] = src
    nd = len(cshape)
    pad = (0,) * (MAX_DIMS - nd)
    per = out_info.per_word
    work = n if not out_info.packed else (out.offset + n - 1) // per - out.offset // per + 1
    params: list = [n, nd, out.offset, work, *cshape, *pad, *cstrides[0], *pad]
    for x, st in zip(inputs, cstrides[1:], strict=False):
        params += [x.offset, *st, *pad]
    for s in scalars:
        params += s.words()
    kernel = _KERNELS.get((id(rt), key))
    if kernel is None:
        kernel = _KERNELS[(id(rt), key)] = rt.kernel(src, label=op)
    rt.dispatch(kernel, [rt.constant(pack_u32(params)), *buffers], grid(work), label=op)


def _row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= s
    return tuple(reversed(strides))


def wgsl_kind(dtype: torch.dtype) -> str:
    """Compute kind of a dtype ('f32' | 'i32' | 'bool' | 'i64')."""
    return dtype_info(dtype).kind
