"""WGSL for batched 1-D complex FFTs along the rows of [rows, n] complex64 data (vec2<f32> pairs).

Powers of two run the Stockham autosort radix-2 network (log2 n dispatches, ping-pong between two
buffers, natural order out; Govindaraju et al., "High Performance Discrete Fourier Transforms on
Graphics Processors"); other lengths a direct DFT (one invocation per output, O(n) each). Twiddles
come from a table W[t] = exp(-2 pi i t / n) computed in float64 on the host once per n, so GPU sin/cos
precision (2^-11 absolute is allowed by Vulkan) never enters; the inverse conjugates them.
"""

from __future__ import annotations

from ...runtime import Kernel, get_runtime

WG = 64

_COMMON = """
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read> X: array<vec2<f32>>;
@group(0) @binding(2) var<storage, read_write> Y: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read> TW: array<vec2<f32>>;
fn cmul(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
  return vec2<f32>(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}
fn twiddle(t: u32, inverse: bool) -> vec2<f32> {
  let w = TW[P[6] + t];
  return select(w, vec2<f32>(w.x, -w.y), inverse);
}
"""

_STAGE = _COMMON + f"""
// P = [rows * n / 2, n, span Ns, inverse, offset X, offset Y, offset W] (offsets in complex elements)
@compute @workgroup_size({WG})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  let g = gid.x + gid.y * nwg.x * {WG}u;
  if (g >= P[0]) {{ return; }}
  let n = P[1]; let half = n / 2u; let ns = P[2];
  let row = g / half; let j = g % half;
  let x = P[4] + row * n; let y = P[5] + row * n;
  let k = j % ns;
  let a = X[x + j];
  let b = cmul(X[x + j + half], twiddle(k * (n / (2u * ns)), P[3] != 0u));
  let d = (j / ns) * ns * 2u + k;
  Y[y + d] = a + b;
  Y[y + d + ns] = a - b;
}}
"""

_DFT = _COMMON + f"""
// P = [rows * n, n, unused, inverse, offset X, offset Y, offset W]
@compute @workgroup_size({WG})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  let g = gid.x + gid.y * nwg.x * {WG}u;
  if (g >= P[0]) {{ return; }}
  let n = P[1];
  let row = g / n; let k = g % n;
  let x = P[4] + row * n;
  var acc = vec2<f32>(0.0);
  var t = 0u;  // j * k mod n, advanced without overflow
  for (var j = 0u; j < n; j++) {{
    acc += cmul(X[x + j], twiddle(t, P[3] != 0u));
    t += k;
    if (t >= n) {{ t -= n; }}
  }}
  Y[P[5] + g] = acc;
}}
"""


def kernel(family: str) -> Kernel:
    """The pipeline of 'stage' (one Stockham radix-2 pass) or 'dft' (direct transform)."""
    source = {"stage": _STAGE, "dft": _DFT}[family]
    return get_runtime().kernel(source, label=f"fft_{family}")
