"""Direct 2-d convolution kernels (1-d runs as H=1), one invocation per output element, f32 accumulate:
the backward pass and bfloat16 (forward f32/f16 convolutions run on kernels/conv.py).

Three kernels cover convolution and transposed convolution, forward and backward:
  fwd:   out[n,o,p,q] = sum_{i,kh,kw} A[n, g*Ig+i, p*s-pad+kh*d, q*s-pad+kw*d] * W[o, i, kh, kw]
  data:  out[n,c,h,w] = sum_{o in group, kh, kw} A[n, o, (h+pad-kh*d)/s, (w+pad-kw*d)/s] * W[o, c%Ig, kh, kw]
  wgrad: out[o,i,kh,kw] = sum_{n,p,q} A[n, o, p, q] * X[n, g*Ig+i, p*s-pad+kh*d, q*s-pad+kw*d]
Every operand is read through its own 4 strides. P = [total, out dims[4], sh, sw, ph, pw, dh, dw, KH, KW,
Ig, Og, A (offset, dims[4], strides[4]), B (offset, dims[4], strides[4]), has_bias, bias offset, bias stride].
"""

from __future__ import annotations

import torch

from ...runtime import get_runtime
from .dtypes import convert, dtype_info
from .operand import Operand, pack_u32
from .recording import dispatch

_BODIES = {
    "fwd": """
  let o = c1; let g = o / P[16];
  for (var i = 0u; i < P[15]; i++) {
    for (var kh = 0u; kh < P[13]; kh++) {
      let h = i32(c2 * P[5] + kh * P[11]) - i32(P[9]);
      if (h < 0 || h >= i32(P[20])) { continue; }
      for (var kw = 0u; kw < P[14]; kw++) {
        let w = i32(c3 * P[6] + kw * P[12]) - i32(P[10]);
        if (w < 0 || w >= i32(P[21])) { continue; }
        acc += la(P[17] + c0 * P[22] + (g * P[15] + i) * P[23] + u32(h) * P[24] + u32(w) * P[25])
             * lb(P[26] + o * P[31] + i * P[32] + kh * P[33] + kw * P[34]);
      }
    }
  }
""",
    "data": """
  let c = c1; let g = c / P[15]; let cl = c % P[15];
  for (var oo = 0u; oo < P[16]; oo++) {
    let o = g * P[16] + oo;
    for (var kh = 0u; kh < P[13]; kh++) {
      let hn = i32(c2) + i32(P[9]) - i32(kh * P[11]);
      if (hn < 0 || hn % i32(P[5]) != 0) { continue; }
      let h = u32(hn) / P[5];
      if (h >= P[20]) { continue; }
      for (var kw = 0u; kw < P[14]; kw++) {
        let wn = i32(c3) + i32(P[10]) - i32(kw * P[12]);
        if (wn < 0 || wn % i32(P[6]) != 0) { continue; }
        let w = u32(wn) / P[6];
        if (w >= P[21]) { continue; }
        acc += la(P[17] + c0 * P[22] + o * P[23] + h * P[24] + w * P[25])
             * lb(P[26] + o * P[31] + cl * P[32] + kh * P[33] + kw * P[34]);
      }
    }
  }
""",
    "wgrad": """
  let o = c0; let i = c1; let kh = c2; let kw = c3; let g = o / P[16];
  for (var n = 0u; n < P[18]; n++) {
    for (var p = 0u; p < P[20]; p++) {
      let h = i32(p * P[5] + kh * P[11]) - i32(P[9]);
      if (h < 0 || h >= i32(P[29])) { continue; }
      for (var q = 0u; q < P[21]; q++) {
        let w = i32(q * P[6] + kw * P[12]) - i32(P[10]);
        if (w < 0 || w >= i32(P[30])) { continue; }
        acc += la(P[17] + n * P[22] + o * P[23] + p * P[24] + q * P[25])
             * lb(P[26] + n * P[31] + (g * P[15] + i) * P[32] + u32(h) * P[33] + u32(w) * P[34]);
      }
    }
  }
""",
}


def _source(kind: str, a_dtype: torch.dtype, b_dtype: torch.dtype, bias_dtype: torch.dtype | None) -> str:
    def load(name, buf, dtype):
        info = dtype_info(dtype, "convolution")
        expr = convert(info.load.replace("B[", buf + "["), info.kind, "f32")
        return f"fn {name}(i: u32) -> f32 {{ return {expr}; }}\n"

    decl = """@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read> A: array<u32>;
@group(0) @binding(2) var<storage, read> Bw: array<u32>;
@group(0) @binding(3) var<storage, read_write> O: array<f32>;
"""
    if bias_dtype is not None:
        decl += "@group(0) @binding(4) var<storage, read> Cb: array<u32>;\n"
    fns = load("la", "A", a_dtype) + load("lb", "Bw", b_dtype)
    bias = ""
    if bias_dtype is not None:
        fns += load("lc", "Cb", bias_dtype)
        bias = "  acc += lc(P[36] + c1 * P[37]);\n"
    return decl + fns + f"""
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  let t = gid.x + gid.y * nwg.x * 64u;
  if (t >= P[0]) {{ return; }}
  let c3 = t % P[4]; let r3 = t / P[4];
  let c2 = r3 % P[3]; let r2 = r3 / P[3];
  let c1 = r2 % P[2]; let c0 = r2 / P[2];
  var acc = 0.0;
{_BODIES[kind]}{bias}  O[t] = acc;
}}
"""


def launch_conv(kind: str, a: Operand, b: Operand, out: Operand, stride: tuple[int, int],
                padding: tuple[int, int], dilation: tuple[int, int], kernel: tuple[int, int], ig: int,
                og: int, bias: Operand | None = None) -> None:
    """Record one conv kernel (`fwd`, `data` or `wgrad`) writing contiguous f32 `out` (4-d)."""
    total = 1
    for s in out.sizes:
        total *= s
    if total == 0:
        return
    params = [total, *out.sizes, *stride, 0, 0, *padding, *dilation, *kernel, ig, og,
              a.offset, *a.sizes, *a.strides, b.offset, *b.sizes, *b.strides]
    params += [1, bias.offset, bias.strides[0]] if bias is not None else [0, 0, 0]
    rt = get_runtime()
    src = _source(kind, a.dtype, b.dtype, bias.dtype if bias is not None else None)
    k = rt.kernel(src, label=f"conv_{kind}")
    binds = [rt.constant(pack_u32(params)), a.buffer_id, b.buffer_id, out.buffer_id]
    if bias is not None:
        binds.append(bias.buffer_id)
    dispatch(k, binds, grid_64(total), label=f"conv_{kind}")   # captured: repeated calls replay it


def grid_64(n: int) -> tuple[int, int, int]:
    """Workgroup counts for n invocations of a 64-wide workgroup."""
    groups = -(-n // 64)
    if groups <= 65535:
        return (groups, 1, 1)
    return (65535, -(-groups // 65535), 1)


__all__ = ["launch_conv", "grid_64"]
