"""2-d pooling kernels over planes [P, H, W] (P = batch * channels), one invocation per output element
(forward) or per input element (backward, no atomics): max (with int64 indices), avg, adaptive avg.

P = [total, planes, H, W, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw, count_include_pad, divisor_override,
x_offset, x plane/h/w strides]."""

from __future__ import annotations

import torch

from ...kernels.launch import linear_grid
from ...kernels.wgsl import PRELUDE
from ...runtime import get_runtime
from .dtypes import convert, dtype_info
from .operand import Operand, pack_u32

_COMMON = """
fn plane_h_w(t: u32, h: u32, w: u32) -> vec3<u32> { return vec3<u32>(t / (h * w), (t / w) % h, t % w); }
fn xat(pl: u32, h: u32, w: u32) -> f32 { return lx(P[16] + pl * P[17] + h * P[18] + w * P[19]); }
fn avg_div(oh: u32, ow: u32) -> f32 {
  if (P[15] != 0u) { return f32(bitcast<i32>(P[15])); }
  let hs = i32(oh * P[8]) - i32(P[10]); let ws = i32(ow * P[9]) - i32(P[11]);
  let he = min(hs + i32(P[6]), i32(P[2] + P[10])); let we = min(ws + i32(P[7]), i32(P[3] + P[11]));
  if (P[14] != 0u) { return f32((he - hs) * (we - ws)); }
  let hs2 = max(hs, 0); let ws2 = max(ws, 0); let he2 = min(he, i32(P[2])); let we2 = min(we, i32(P[3]));
  return f32((he2 - hs2) * (we2 - ws2));
}
fn a_start(o: u32, osz: u32, isz: u32) -> u32 { return (o * isz) / osz; }
fn a_end(o: u32, osz: u32, isz: u32) -> u32 { return ((o + 1u) * isz + osz - 1u) / osz; }
// does output o's window (along axis a: 0 = h, 1 = w) span input position i?
fn in_window(i: u32, o: u32, a: u32) -> bool {
  let start = i32(o * P[8u + a]) - i32(P[10u + a]);
  return i32(i) >= start && i32(i) <= start + i32((P[6u + a] - 1u) * P[12u + a]);
}
fn in_adaptive(i: u32, o: u32, a: u32) -> bool {
  return i >= a_start(o, P[4u + a], P[2u + a]) && i < a_end(o, P[4u + a], P[2u + a]);
}
fn adaptive_count(oh: u32, ow: u32) -> f32 {
  let h = a_end(oh, P[4], P[2]) - a_start(oh, P[4], P[2]);
  return f32(h * (a_end(ow, P[5], P[3]) - a_start(ow, P[5], P[3])));
}
"""

_BODIES = {
    "max": """
  let c = plane_h_w(t, P[4], P[5]);
  var best = -inf_(); var bi = 0xffffffffu;
  for (var i = 0u; i < P[6]; i++) {
    let h = i32(c.y * P[8] + i * P[12]) - i32(P[10]);
    if (h < 0 || h >= i32(P[2])) { continue; }
    for (var j = 0u; j < P[7]; j++) {
      let w = i32(c.z * P[9] + j * P[13]) - i32(P[11]);
      if (w < 0 || w >= i32(P[3])) { continue; }
      let v = xat(c.x, u32(h), u32(w));
      if (bi == 0xffffffffu || v > best || (isnan_(v) && !isnan_(best))) {
        best = v; bi = u32(h) * P[3] + u32(w);
      }
    }
  }
  O[t] = best; I[2u * t] = bi; I[2u * t + 1u] = 0u;
""",
    "avg": """
  let c = plane_h_w(t, P[4], P[5]);
  var s = 0.0;
  let hs = i32(c.y * P[8]) - i32(P[10]); let ws = i32(c.z * P[9]) - i32(P[11]);
  for (var i = 0u; i < P[6]; i++) {
    let h = hs + i32(i);
    if (h < 0 || h >= i32(P[2])) { continue; }
    for (var j = 0u; j < P[7]; j++) {
      let w = ws + i32(j);
      if (w < 0 || w >= i32(P[3])) { continue; }
      s += xat(c.x, u32(h), u32(w));
    }
  }
  O[t] = s / avg_div(c.y, c.z);
""",
    "adaptive_avg": """
  let c = plane_h_w(t, P[4], P[5]);
  let hs = a_start(c.y, P[4], P[2]); let he = a_end(c.y, P[4], P[2]);
  let ws = a_start(c.z, P[5], P[3]); let we = a_end(c.z, P[5], P[3]);
  var s = 0.0;
  for (var h = hs; h < he; h++) { for (var w = ws; w < we; w++) { s += xat(c.x, h, w); } }
  O[t] = s / f32((he - hs) * (we - ws));
""",
    "adaptive_max": """
  let c = plane_h_w(t, P[4], P[5]);
  let hs = a_start(c.y, P[4], P[2]); let he = a_end(c.y, P[4], P[2]);
  let ws = a_start(c.z, P[5], P[3]); let we = a_end(c.z, P[5], P[3]);
  var best = -inf_(); var bi = 0xffffffffu;
  for (var h = hs; h < he; h++) {
    for (var w = ws; w < we; w++) {
      let v = xat(c.x, h, w);
      if (bi == 0xffffffffu || v > best || (isnan_(v) && !isnan_(best))) { best = v; bi = h * P[3] + w; }
    }
  }
  O[t] = best; I[2u * t] = bi; I[2u * t + 1u] = 0u;
""",
}

# backwards: t indexes the INPUT and sums the gradient G (contiguous [P, OH, OW]) of every output window
# holding it: `win` is the window test (fixed or adaptive), `take` what one window contributes
# (max: its gradient if the window's max index Ix is this element; avg: its gradient over its divisor)
_BACKWARD = """
  let c = plane_h_w(t, P[2], P[3]);
  let me = c.y * P[3] + c.z;
  var s = 0.0;
  for (var oh = 0u; oh < P[4]; oh++) {{
    if (!{win}(c.y, oh, 0u)) {{ continue; }}
    for (var ow = 0u; ow < P[5]; ow++) {{
      if (!{win}(c.z, ow, 1u)) {{ continue; }}
      let o = (c.x * P[4] + oh) * P[5] + ow;
      {take}
    }}
  }}
  O[t] = s;
"""
_MAX_TAKE = "if (Ix[2u * o] == me) { s += lg(o); }"
_BODIES.update({
    "max_bwd": _BACKWARD.format(win="in_window", take=_MAX_TAKE),
    "adaptive_max_bwd": _BACKWARD.format(win="in_adaptive", take=_MAX_TAKE),
    "avg_bwd": _BACKWARD.format(win="in_window", take="s += lg(o) / avg_div(oh, ow);"),
    "adaptive_avg_bwd": _BACKWARD.format(win="in_adaptive", take="s += lg(o) / adaptive_count(oh, ow);"),
})


def _source(kind: str, x_dtype: torch.dtype, g_dtype: torch.dtype | None) -> str:
    xi = dtype_info(x_dtype, "pool")
    decl = ["@group(0) @binding(0) var<storage, read> P: array<u32>;",
            "@group(0) @binding(1) var<storage, read> X: array<u32>;",
            "@group(0) @binding(2) var<storage, read_write> O: array<f32>;"]
    fns = f"fn lx(i: u32) -> f32 {{ return {convert(xi.load.replace('B[', 'X['), xi.kind, 'f32')}; }}\n"
    if kind in ("max", "adaptive_max"):
        decl.append("@group(0) @binding(3) var<storage, read_write> I: array<u32>;")
    if kind.endswith("_bwd"):
        gi = dtype_info(g_dtype, "pool")
        decl.append("@group(0) @binding(3) var<storage, read> G: array<u32>;")
        fns += f"fn lg(i: u32) -> f32 {{ return {convert(gi.load.replace('B[', 'G['), gi.kind, 'f32')}; }}\n"
        if kind in ("max_bwd", "adaptive_max_bwd"):
            decl.append("@group(0) @binding(4) var<storage, read> Ix: array<u32>;")
    return "\n".join(decl) + PRELUDE + fns + _COMMON + f"""
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  let t = gid.x + gid.y * nwg.x * 64u;
  if (t >= P[0]) {{ return; }}
  _ = X[0];  // keep X in the layout for kernels that only read its geometry
{_BODIES[kind]}}}
"""


def launch_pool(kind: str, x: Operand, out_buffer: int, geometry: list[int], total: int,
                extra: tuple[int, ...] = (), g_dtype: torch.dtype | None = None) -> None:
    """Record pooling kernel `kind`; x is [planes, H, W] strided, geometry = P[1:16], outputs contiguous."""
    if total == 0:
        return
    params = [total, *geometry, x.offset, *x.strides]
    rt = get_runtime()
    k = rt.kernel(_source(kind, x.dtype, g_dtype), label=f"pool_{kind}")
    rt.dispatch(k, [rt.constant(pack_u32(params)), x.buffer_id, out_buffer, *extra], linear_grid(total),
                label=f"pool_{kind}")
