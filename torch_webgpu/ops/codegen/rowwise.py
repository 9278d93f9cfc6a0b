"""Row kernels: one 64-wide workgroup per row of a strided tensor, with workgroup sum/max helpers.

A "row" is every element along one dim; all other dims (up to 8) index rows. Each buffer (X, G, O)
has its own offset, dim stride and row strides, so transposed or sliced inputs need no copy.
Bodies (softmax, log_softmax, their backwards, layer norm) are written against xl(r), gl(r), st(r, v),
wsum(v), wmax(v). P = [rows, N, n_row_dims, eps, row_sizes[8], then per buffer (offset, dim stride,
row strides[8])].
"""

from __future__ import annotations

import torch

from ...kernels.wgsl import PRELUDE
from ...runtime import get_runtime
from .dtypes import convert, dtype_info
from .operand import MAX_DIMS, Operand, pack_u32
from .recording import dispatch

WG = 64
_B = 4 + MAX_DIMS  # first buffer block
_BLK = 2 + MAX_DIMS

BODIES = {
    "softmax": """
  var m = -inf_();
  for (var r = lid; r < n; r += 64u) { m = max_(m, xl(r)); }
  m = wmax(m, lid);
  var s = 0.0;
  for (var r = lid; r < n; r += 64u) { s += exp(xl(r) - m); }
  s = wsum(s, lid);
  for (var r = lid; r < n; r += 64u) { st(r, exp(xl(r) - m) / s); }
""",
    "log_softmax": """
  var m = -inf_();
  for (var r = lid; r < n; r += 64u) { m = max_(m, xl(r)); }
  m = wmax(m, lid);
  var s = 0.0;
  for (var r = lid; r < n; r += 64u) { s += exp(xl(r) - m); }
  s = wsum(s, lid);
  let lse = m + log(s);
  for (var r = lid; r < n; r += 64u) { st(r, xl(r) - lse); }
""",
    "softmax_backward": """
  var s = 0.0;
  for (var r = lid; r < n; r += 64u) { s += gl(r) * xl(r); }
  s = wsum(s, lid);
  for (var r = lid; r < n; r += 64u) { st(r, xl(r) * (gl(r) - s)); }
""",
    "log_softmax_backward": """
  var s = 0.0;
  for (var r = lid; r < n; r += 64u) { s += gl(r); }
  s = wsum(s, lid);
  for (var r = lid; r < n; r += 64u) { st(r, gl(r) - exp(xl(r)) * s); }
""",
    # X = input, G = weight (or unused), O = normalised output; E receives [mean, rstd] per row
    "layer_norm": """
  var s = 0.0;
  for (var r = lid; r < n; r += 64u) { s += xl(r); }
  let mean = wsum(s, lid) / f32(n);
  var v = 0.0;
  for (var r = lid; r < n; r += 64u) { let d = xl(r) - mean; v += d * d; }
  let rstd = inverseSqrt(wsum(v, lid) / f32(n) + eps);
  for (var r = lid; r < n; r += 64u) { st(r, (xl(r) - mean) * rstd); }
  if (lid == 0u && live) { E[2u * row] = mean; E[2u * row + 1u] = rstd; }
""",
}


def _source(body: str, x_dtype: torch.dtype, g_dtype: torch.dtype | None, extra: bool) -> str:
    xi = dtype_info(x_dtype)
    decl = ["@group(0) @binding(0) var<storage, read> P: array<u32>;",
            "@group(0) @binding(1) var<storage, read> X: array<u32>;",
            "@group(0) @binding(2) var<storage, read_write> O: array<f32>;"]
    fns = f"fn xload(i: u32) -> f32 {{ return {convert(xi.load.replace('B[', 'X['), xi.kind, 'f32')}; }}\n"
    if g_dtype is not None:
        gi = dtype_info(g_dtype)
        decl.append("@group(0) @binding(3) var<storage, read> G: array<u32>;")
        gexpr = convert(gi.load.replace('B[', 'G['), gi.kind, 'f32')
        fns += f"fn gload(i: u32) -> f32 {{ return {gexpr}; }}\n"
    if extra:
        decl.append(f"@group(0) @binding({4 if g_dtype is not None else 3}) var<storage, read_write> E: "
                    f"array<f32>;")
    xb, gb, ob = _B, _B + _BLK, _B + 2 * _BLK
    src = "\n".join(decl) + PRELUDE + fns + f"""
var<workgroup> red: array<f32, {WG}>;
var<private> xbase: u32;
var<private> gbase: u32;
var<private> obase: u32;
var<private> live: bool;
fn wsum(v: f32, lid: u32) -> f32 {{
  red[lid] = v;
  workgroupBarrier();
  for (var k = {WG // 2}u; k > 0u; k = k >> 1u) {{
    if (lid < k) {{ red[lid] = red[lid] + red[lid + k]; }}
    workgroupBarrier();
  }}
  let r = red[0];
  workgroupBarrier();
  return r;
}}
fn wmax(v: f32, lid: u32) -> f32 {{
  red[lid] = v;
  workgroupBarrier();
  for (var k = {WG // 2}u; k > 0u; k = k >> 1u) {{
    if (lid < k) {{ red[lid] = max_(red[lid], red[lid + k]); }}
    workgroupBarrier();
  }}
  let r = red[0];
  workgroupBarrier();
  return r;
}}
fn row_base(row: u32, b: u32) -> u32 {{
  var r = P[b]; var rem = row;
  for (var d = i32(P[2]) - 1; d >= 0; d--) {{
    let n = P[4u + u32(d)]; r += (rem % n) * P[b + 2u + u32(d)]; rem = rem / n;
  }}
  return r;
}}
fn xl(r: u32) -> f32 {{ return xload(xbase + r * P[{xb + 1}u]); }}
{"fn gl(r: u32) -> f32 { return gload(gbase + r * P[" + str(gb + 1) + "u]); }" if g_dtype else ""}
fn st(r: u32, v: f32) {{ if (live) {{ O[obase + r * P[{ob + 1}u]] = v; }} }}
@compute @workgroup_size({WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {{
  let lid = lid3.x;
  let row = wid.x + wid.y * nwg.x;
  live = row < P[0];
  let n = select(0u, P[1], live);
  let eps = bitcast<f32>(P[3]);
  if (live) {{
    xbase = row_base(row, {xb}u);
    gbase = row_base(row, {gb}u);
    obase = row_base(row, {ob}u);
  }}
{body}}}
"""
    return src


def _block(o: Operand | None, dim: int, kept: list[int]) -> list[int]:
    if o is None:
        return [0] * _BLK
    return [o.offset, o.strides[dim], *[o.strides[d] for d in kept], *[0] * (MAX_DIMS - len(kept))]


def launch_rows(kind: str, x: Operand, dim: int, out: Operand, g: Operand | None = None, eps: float = 0.0,
                extra: int | None = None) -> None:
    """Run row kernel `kind` along `dim` of x (and g) writing f32 `out` (same shape, own strides)."""
    nd = len(x.sizes)
    kept = [d for d in range(nd) if d != dim]
    if len(kept) > MAX_DIMS:
        raise NotImplementedError(f"webgpu: '{kind}' supports at most {MAX_DIMS + 1} dims")
    rows = 1
    for d in kept:
        rows *= x.sizes[d]
    n = x.sizes[dim] if nd else 1
    if rows == 0 or n == 0:
        return
    sizes = [x.sizes[d] for d in kept] + [0] * (MAX_DIMS - len(kept))
    params = [rows, n, len(kept), float(eps), *sizes, *_block(x, dim, kept), *_block(g, dim, kept),
              *_block(out, dim, kept)]
    rt = get_runtime()
    kernel = rt.kernel(_source(BODIES[kind], x.dtype, g.dtype if g is not None else None, extra is not None),
                       label=kind)
    binds = [rt.constant(pack_u32(params)), x.buffer_id, out.buffer_id]
    if g is not None:
        binds.append(g.buffer_id)
    if extra is not None:
        binds.append(extra)
    groups = (rows, 1, 1) if rows <= 65535 else (65535, -(-rows // 65535), 1)
    dispatch(kernel, binds, groups, label=kind)
