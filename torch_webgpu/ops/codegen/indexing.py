"""Index kernels over strided operands (up to 8 dims), one invocation per output element, no atomics.

gather:  out[c] = X[x_off + sum_{d != dim} c[d]*xs[d] + wrap(I[c]) * xs[dim]]   (index_select, gather,
         embedding: the index operand is broadcast to the output shape by strides)
scatter: out[c] = base[c] (+)= S[c with dim=j] for every j with I[c with dim=j] == c[dim], c[d] < I.shape[d]
         ("add" sums in j order, "set" keeps the last match) (scatter, scatter_add, index_add, embedding
         backward)
Indices are int64 (low word) or int32; negative ones count from the end; out-of-range reads give 0.
P = [n, ndim, dim, dim_size(of X/out), shape[8], then per operand (offset, strides[8]), index shape[8],
alpha]; gather appends [lo, len, masked]: X holds rows [lo, lo + len) of dim, masked launches write only
the outputs whose index falls there (a source wider than one kernel binding is gathered in such chunks).
"""

from __future__ import annotations

import torch

from ...kernels.wgsl import PRELUDE
from ...runtime import get_runtime
from .dtypes import INT64_INDEX_LOAD, convert, dtype_info
from .elementwise import grid
from .operand import MAX_DIMS, Operand, Split, narrow, pack_u32, window_bindings

_H = 4 + MAX_DIMS
_BLK = 1 + MAX_DIMS


def _index_load(dtype: torch.dtype) -> str:
    if dtype == torch.int64:
        return INT64_INDEX_LOAD
    info = dtype_info(dtype, "index")
    if info.kind != "i32":
        raise TypeError(f"webgpu: index tensors must be int64 or int32, got {dtype}")
    return info.load


_COORDS = f"""
fn coords(li: u32) -> array<u32, {MAX_DIMS}> {{
  var c: array<u32, {MAX_DIMS}>;
  var rem = li;
  for (var d = i32(P[1]) - 1; d >= 0; d--) {{ let n = P[4u + u32(d)]; c[d] = rem % n; rem = rem / n; }}
  return c;
}}
fn off(c: ptr<function, array<u32, {MAX_DIMS}>>, b: u32) -> u32 {{
  var r = P[b];
  for (var d = 0u; d < P[1]; d++) {{ r += (*c)[d] * P[b + 1u + d]; }}
  return r;
}}
"""


def _kernel(inputs: list[tuple[str, str, str, str]], body: str) -> str:
    """WGSL over out's elements: binding 0 = P, then the read-only `inputs` (buffer, loader name, WGSL
    type, load expression of element i of buffer B), then O; `body` runs with t and c = coords(t)."""
    lines = ["", "@group(0) @binding(0) var<storage, read> P: array<u32>;"]
    lines += [f"@group(0) @binding({b}) var<storage, read> {buf}: array<u32>;"
              for b, (buf, _, _, _) in enumerate(inputs, 1)]
    lines.append(f"@group(0) @binding({len(inputs) + 1}) var<storage, read_write> O: array<u32>;")
    lines += [f"fn {fn}(i: u32) -> {ty} {{ return {load.replace('B[', buf + '[')}; }}"
              for buf, fn, ty, load in inputs]
    return "\n".join(lines) + f"""
{PRELUDE}{_COORDS}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  let t = gid.x + gid.y * nwg.x * 64u;
  if (t >= P[0]) {{ return; }}
  var c = coords(t);
{body}}}
"""


def _params(out: Operand, dim: int, dim_size: int) -> tuple[int, list[int], list[int]]:
    """(elements of out, the parameter header [n, ndim, dim, dim_size, shape[8]], the padding to 8 dims)."""
    shape = tuple(out.sizes)
    n = 1
    for s in shape:
        n *= s
    pad = [0] * (MAX_DIMS - len(shape))
    return n, [n, len(shape), dim, dim_size, *shape, *pad], pad


def _gather_store(oi) -> str:
    if oi.kind == "i64":
        ob = _H + 2 * _BLK
        return f"  let o = off(&co, {ob}u);\n  O[2u * o] = v2.x;\n  O[2u * o + 1u] = v2.y;"
    return f"  O[off(&co, {_H + 2 * _BLK}u)] = {oi.store.replace('v', 'v2')};"


def _t(kind: str) -> str:
    return {"f32": "f32", "i32": "i32", "bool": "bool", "i64": "vec2<u32>"}[kind]


def _zero(kind: str) -> str:
    return {"f32": "0.0", "i32": "0", "bool": "false", "i64": "vec2<u32>(0u, 0u)"}[kind]


def _gather_source(x_dtype, i_dtype, out_dtype) -> str:
    xi, oi = dtype_info(x_dtype), dtype_info(out_dtype)
    if oi.packed:
        raise NotImplementedError("gather into packed dtypes")
    xb, ib = _H, _H + _BLK
    inputs = [("X", "lx", _t(xi.kind), xi.load), ("I", "li", "i32", _index_load(i_dtype))]
    lo = _H + 3 * _BLK
    return _kernel(inputs, f"""  var k = li(off(&c, {ib}u));
  if (k < 0) {{ k = k + i32(P[3]); }}
  let kk = k - i32(P[{lo}u]);
  let mine = k >= 0 && u32(k) < P[3] && kk >= 0 && u32(kk) < P[{lo + 1}u];
  if (!mine && P[{lo + 2}u] != 0u) {{ return; }}
  var v = {_zero(xi.kind)};
  if (mine) {{
    c[P[2]] = 0u;
    v = lx(off(&c, {xb}u) + u32(kk) * P[{xb + 1}u + P[2]]);
  }}
  var co = coords(t);
  let v2 = {convert("v", xi.kind, oi.kind)};
{_gather_store(oi)}
""")


def launch_gather(x: Operand, index: Operand, out: Operand, dim: int, lo: int = 0, length: int | None = None,
                  masked: bool = False) -> None:
    """out[c] = x[c with dim = index[c]]; index is already broadcast to out's shape; out 32-bit.

    Operands wider than one kernel binding are split: out and index along any dim (x too, but along
    `dim`), and x along `dim` into chunks [lo, lo + length) that write only their own outputs (`masked`;
    the first chunk also writes the zeros of out-of-range indices)."""
    length = x.sizes[dim] if length is None else length
    n, params, pad = _params(out, dim, x.sizes[dim])
    if n == 0:
        return
    rt = get_runtime()
    chunk = narrow(x, dim, lo, length)
    windows = window_bindings(rt, [chunk, index, out], written=2)
    if isinstance(windows, Split):
        d = windows.dim
        if windows.operand == 0 and d == dim:   # the source's rows: chunks along dim
            half = length // 2
            launch_gather(x, index, out, dim, lo, half, masked)
            launch_gather(x, index, out, dim, lo + half, length - half, True)
            return
        size = out.sizes[d]
        for start, part in ((0, size // 2), (size // 2, size - size // 2)):
            xs = x if d == dim else narrow(x, d, start, part)
            launch_gather(xs, narrow(index, d, start, part), narrow(out, d, start, part), dim, lo, length,
                          masked)
        return
    for o in windows.operands:
        params += [o.offset, *o.strides, *pad]
    params += [lo, length, int(masked)]
    k = rt.kernel(_gather_source(x.dtype, index.dtype, out.dtype), label="gather")
    # one binding per operand (the kernel declares three), windows of any buffer larger than one binding
    rt.dispatch(k, [rt.constant(pack_u32(params)), *(windows.bindings[i] for i in windows.slot)],
                grid(n, 64), label="gather")


def _scatter_source(mode: str, base_dtype, src_dtype, i_dtype, src_scalar: bool) -> str:
    bi, si = dtype_info(base_dtype), dtype_info(src_dtype)
    if bi.packed or bi.kind == "i64":
        raise NotImplementedError(f"webgpu: scatter into {base_dtype} is not supported (use int32/float32)")
    kind = bi.kind
    bb, sb, ib, ob = _H, _H + _BLK, _H + 2 * _BLK, _H + 3 * _BLK
    ishape = _H + 4 * _BLK
    alpha = ishape + MAX_DIMS
    if src_scalar:
        src_val = f"bitcast<{_t(kind)}>(P[{alpha + 1}u])" if kind != "bool" else f"(P[{alpha + 1}u] != 0u)"
    else:
        src_val = convert(f"ls(off(&cj, {sb}u))", si.kind, kind)
    alpha_v = f"bitcast<{_t(kind)}>(P[{alpha}u])" if kind != "bool" else "true"
    t = _t(kind)
    combine = {
        "add": "acc = acc + alpha * sv;" if kind != "bool" else "acc = acc || sv;",
        "set": "acc = sv;",
        "mul": "acc = acc * sv;" if kind != "bool" else "acc = acc && sv;",
        "mean": "acc = acc + sv;",
        "amax": "acc = max_(acc, sv);" if kind == "f32" else "acc = max(acc, sv);",
        "amin": "acc = min_(acc, sv);" if kind == "f32" else "acc = min(acc, sv);",
    }[mode]
    ident = {"add": "0", "mean": "0", "set": "0", "mul": "1", "amax": "-inf_()", "amin": "inf_()"}[mode]
    if kind == "i32":
        ident = {"-inf_()": "-2147483647 - 1", "inf_()": "2147483647"}.get(ident, ident)
        ident = f"{t}({ident})"
    elif kind == "f32":
        ident = ident if "inf" in ident else f"{ident}.0"
    else:
        ident = "false" if ident == "0" else "true"
    finish = ""
    if mode == "mean":
        div = "f32(n)" if kind == "f32" else "i32(n)"
        finish = (f"  if (cnt > 0u || include_self) {{\n    let n = cnt + select(0u, 1u, include_self);\n"
                  f"    acc = acc / {div};\n  }}\n")
    inputs = [("Bs", "lb", _t(kind), bi.load), ("S", "ls", _t(si.kind), si.load),
              ("I", "li", "i32", _index_load(i_dtype))]
    return _kernel(inputs, f"""  let alpha = {alpha_v};
  let basev = lb(off(&c, {bb}u));
  let include_self = P[{alpha + 2}u] != 0u;
  var acc = basev;
  if (!include_self) {{ acc = {ident}; }}
  var cnt = 0u;
  let dim = P[2];
  var inside = true;
  for (var d = 0u; d < P[1]; d++) {{ if (d != dim && c[d] >= P[{ishape}u + d]) {{ inside = false; }} }}
  if (inside) {{
    var cj = c;
    for (var j = 0u; j < P[{ishape}u + dim]; j++) {{
      cj[dim] = j;
      var k = li(off(&cj, {ib}u));
      if (k < 0) {{ k = k + i32(P[3]); }}
      if (k == i32(c[dim])) {{
        let sv = {src_val};
        {combine}
        cnt++;
      }}
    }}
  }}
{finish}  if (!include_self && cnt == 0u) {{ acc = basev; }}
  let v = acc;
  O[off(&c, {ob}u)] = {bi.store if kind != "bool" else "select(0u, 1u, v)"};
""")


def launch_scatter(mode: str, base: Operand, src: Operand | float | int | bool, index: Operand, out: Operand,
                   dim: int, alpha: float | int = 1, include_self: bool = True) -> None:
    """out = base with src scattered along dim at index (mode add/set/mul/mean/amax/amin); index and src
    share index's shape; include_self=False starts each hit element from the reduction's identity.
    Operands may lie in buffers larger than one kernel binding (each is bound through a window)."""
    n, params, pad = _params(out, dim, out.sizes[dim] if out.sizes else 1)
    if n == 0:
        return
    scalar = not isinstance(src, Operand)
    rt = get_runtime()
    windows = window_bindings(rt, [base, index if scalar else src, index, out], written=3)
    if isinstance(windows, Split):
        from ...runtime import LimitExceededError

        raise LimitExceededError(
            f"webgpu: scatter_{mode} of operands spanning more than one kernel binding "
            f"(max-storage-buffer-binding-size {rt.max_storage_binding}) is not split yet; scatter into "
            "slices of the tensor instead")
    wbase, wsrc, windex, wout = windows.operands
    for o in (wbase, None if scalar else wsrc, windex, wout):
        params += [0] * _BLK if o is None else [o.offset, *o.strides, *pad]
    params += [*index.sizes, *pad]
    kind = dtype_info(base.dtype).kind
    conv = float if kind == "f32" else int
    params += [conv(alpha), conv(src) if scalar else 0, int(include_self)]
    src_dtype = base.dtype if scalar else src.dtype
    k = rt.kernel(_scatter_source(mode, base.dtype, src_dtype, index.dtype, scalar), label=f"scatter_{mode}")
    rt.dispatch(k, [rt.constant(pack_u32(params)), *(windows.bindings[i] for i in windows.slot)],
                grid(n, 64), label=f"scatter_{mode}")
