"""Philox4x32-10 in WGSL: the counter-based generator of eager random ops and device-side sampling.

A shader that includes `PHILOX_WGSL` defines `fn X(k: u32) -> u32` giving k = 0..3: seed lo, seed hi,
offset lo, offset hi (torch's generator state); `draw(i)` is element i's four words, `unit` maps a
word to [0, 1) from its top 24 bits.
"""

from __future__ import annotations

PHILOX_WGSL = """
fn mulhilo(a: u32, b: u32) -> vec2<u32> {
  let a0 = a & 0xffffu; let a1 = a >> 16u; let b0 = b & 0xffffu; let b1 = b >> 16u;
  let ll = a0 * b0; let lh = a0 * b1; let hl = a1 * b0; let hh = a1 * b1;
  let mid = (ll >> 16u) + (lh & 0xffffu) + (hl & 0xffffu);
  return vec2<u32>(a * b, hh + (lh >> 16u) + (hl >> 16u) + (mid >> 16u));
}
fn philox(ctr: vec4<u32>, key: vec2<u32>) -> vec4<u32> {
  var c = ctr;
  var k = key;
  for (var r = 0u; r < 10u; r++) {
    let p0 = mulhilo(0xD2511F53u, c.x);
    let p1 = mulhilo(0xCD9E8D57u, c.z);
    c = vec4<u32>(p1.y ^ c.y ^ k.x, p1.x, p0.y ^ c.w ^ k.y, p0.x);
    k = k + vec2<u32>(0x9E3779B9u, 0xBB67AE85u);
  }
  return c;
}
// X(0..3) = seed lo, seed hi, offset lo, offset hi.
fn draw(li: u32) -> vec4<u32> { return philox(vec4<u32>(li, 0u, X(2u), X(3u)), vec2<u32>(X(0u), X(1u))); }
fn unit(r: u32) -> f32 { return f32(r >> 8u) * (1.0 / 16777216.0); }
"""
