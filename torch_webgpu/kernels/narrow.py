"""f32 -> f16 narrowing of n contiguous elements: the store of a library result computed in f32 whose
tensor is f16 (a compiled f16 reduction, a row op whose rows are not vec4).

A thread writes one u32 word (two halves), so no two threads share a word; the last word of an odd n
gets 0 in its upper half (plan buffers are rounded up to whole words).

torch-free.
"""

from __future__ import annotations

from .launch import PARAMS, DeviceCaps, KernelLaunch, ceil_div, grid_within

WG = 256
_WGSL = f"""
struct Params {{ n: u32, pad0: u32, pad1: u32, pad2: u32 }}
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> O: array<u32>;

@compute @workgroup_size({WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {{
  let w = (wid.x + wid.y * nwg.x) * {WG}u + lid.x;
  let e = 2u * w;
  if (e >= P.n) {{ return; }}
  let hi = select(0.0, X[e + 1u], e + 1u < P.n);
  O[w] = pack2x16float(vec2<f32>(X[e], hi));
}}
"""


def plan_narrow(n: int, caps: DeviceCaps) -> KernelLaunch:
    """The launch narrowing f32 "x" [n] into f16 "out" [n]."""
    if n <= 0:
        raise ValueError(f"narrow: needs at least one element, got n={n}")
    limit = caps.limit("max-compute-workgroups-per-dimension", 65535)
    groups = grid_within(ceil_div(ceil_div(n, 2), WG), limit)
    return KernelLaunch(name="narrow.f32_f16", wgsl=_WGSL, grid=(*groups, 1), workgroup_size=(WG, 1, 1),
                        bindings=(PARAMS, "x", "out"), params=(int(n),), read_only=frozenset({1}))
