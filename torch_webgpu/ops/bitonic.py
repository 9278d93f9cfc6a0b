"""Bitonic sort on the device: the permutation that sorts each row of a tensor along its last dim.

Each element becomes a (64-bit order key, index) pair. The key maps the value to an unsigned integer
whose order is torch's order (floats: sign-flipped bits, -0.0 as +0.0, every NaN the largest key;
integers: the sign bit flipped; descending: the key's bitwise complement). Pairs compare by key, then by
index, so every pair is distinct and the network's result is the unique *stable* order: ties keep their
index order, as torch's stable sort does. Rows are padded to a power of two with all-ones keys and
indices >= n, which sort after every real element in both directions.

The network runs k = 2, 4, .. N (merge size) and j = k/2 .. 1 (compare distance). Steps with j < 512
run inside one workgroup (512 slots in workgroup memory, one barrier per step); larger j run one global
dispatch each. Work is O(n log^2 n) per row, in O(log^2 n) dispatches.
"""

from __future__ import annotations

import torch

from ..runtime import get_runtime
from ..runtime.capture import unreplayable
from .codegen.dtypes import dtype_info
from .codegen.elementwise import grid
from .codegen.operand import pack_u32
from .rows import row_wgsl, row_words
from .tensor_buffers import buffer_id, fits_one_binding, max_binding_bytes, new_empty, windowed_binding

BLOCK = 512  # slots sorted in workgroup memory by one workgroup of BLOCK / 2 invocations

# WGSL body of key(v): the 64-bit order key (hi, lo) of a loaded value `v`, per compute kind of
# codegen/dtypes.py (KEY_INPUT_TYPE: the WGSL type of v)
ORDER_KEY = {
    "f32": """
  var bits = bitcast<u32>(v);
  if ((bits & 0x7fffffffu) == 0u) { bits = 0u; }                       // -0.0 sorts as +0.0
  var hi = select(bits | 0x80000000u, ~bits, (bits & 0x80000000u) != 0u);
  if ((bits & 0x7fffffffu) > 0x7f800000u) { hi = 0xffffffffu; }       // NaN is the largest
  return vec2<u32>(hi, 0u);""",
    "i32": "  return vec2<u32>(bitcast<u32>(v) ^ 0x80000000u, 0u);",
    "bool": "  return vec2<u32>(select(0u, 1u, v), 0u);",
    "i64": "  return vec2<u32>(v.y ^ 0x80000000u, v.x);",
}
KEY_INPUT_TYPE = {"f32": "f32", "i32": "i32", "bool": "bool", "i64": "vec2<u32>"}

_KEYS = """
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read> X: array<u32>;
@group(0) @binding(2) var<storage, read_write> K: array<u32>;
@group(0) @binding(3) var<storage, read_write> I: array<u32>;
fn load(i: u32) -> {vtype} {{ return {load}; }}
fn key(v: {vtype}) -> vec2<u32> {{{key}
}}
{rows}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  // P = [slots, n, N, descending, row words (ops/rows.py)]
  let t = gid.x + gid.y * nwg.x * 64u;
  if (t >= P[0]) {{ return; }}
  let row = t / P[2]; let q = t % P[2];
  var k = vec2<u32>(0xffffffffu, 0xffffffffu);  // padding: after every real element
  if (q < P[1]) {{
    k = key(load(row_start(row) + q * row_step()));
    if (P[3] != 0u) {{ k = ~k; }}
  }}
  K[2u * t] = k.x; K[2u * t + 1u] = k.y; I[t] = q;
}}
"""

_BEFORE = """
fn before(a: vec3<u32>, b: vec3<u32>) -> bool {
  if (a.x != b.x) { return a.x < b.x; }
  if (a.y != b.y) { return a.y < b.y; }
  return a.z < b.z;
}
"""

_LOCAL = ("""
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read_write> K: array<u32>;
@group(0) @binding(2) var<storage, read_write> I: array<u32>;
var<workgroup> S: array<vec3<u32>, BLOCKu>;
""" + _BEFORE + """
@compute @workgroup_size(HALF)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
  // P = [slots, N, k_first, k_last, j_first]: for k = k_first.. k_last (doubling), j = min(k/2, j_first)..1
  let first = (wid.x + wid.y * nwg.x) * BLOCKu;
  let slots = P[0];
  for (var h = 0u; h < 2u; h++) {
    let l = lid.x + h * HALFu; let g = first + l;
    if (g < slots) { S[l] = vec3<u32>(K[2u * g], K[2u * g + 1u], I[g]); }
  }
  workgroupBarrier();
  for (var k = P[2]; k <= P[3]; k = k * 2u) {
    for (var j = min(k / 2u, P[4]); j > 0u; j = j / 2u) {
      let i = 2u * j * (lid.x / j) + lid.x % j;
      let l = i + j;
      if (first + l < slots) {
        let asc = (((first + i) & (P[1] - 1u)) & k) == 0u;
        let a = S[i]; let b = S[l];
        if (before(b, a) == asc) { S[i] = b; S[l] = a; }
      }
      workgroupBarrier();
    }
  }
  for (var h = 0u; h < 2u; h++) {
    let l = lid.x + h * HALFu; let g = first + l;
    if (g < slots) { let s = S[l]; K[2u * g] = s.x; K[2u * g + 1u] = s.y; I[g] = s.z; }
  }
}
""").replace("BLOCK", str(BLOCK)).replace("HALF", str(BLOCK // 2))

_GLOBAL = """
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read_write> K: array<u32>;
@group(0) @binding(2) var<storage, read_write> I: array<u32>;
""" + _BEFORE + """
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  // P = [slots, N, k, j]: one compare-exchange step of distance j inside merges of size k
  let p = gid.x + gid.y * nwg.x * 256u;
  if (p >= P[0] / 2u) { return; }
  let j = P[3];
  let i = 2u * j * (p / j) + p % j;
  let l = i + j;
  let asc = ((i & (P[1] - 1u)) & P[2]) == 0u;
  let a = vec3<u32>(K[2u * i], K[2u * i + 1u], I[i]);
  let b = vec3<u32>(K[2u * l], K[2u * l + 1u], I[l]);
  if (before(b, a) == asc) {
    K[2u * i] = b.x; K[2u * i + 1u] = b.y; I[i] = b.z;
    K[2u * l] = a.x; K[2u * l + 1u] = a.y; I[l] = a.z;
  }
}
"""


def max_sort_slots() -> int:
    """Slots whose 8-byte keys fit one storage binding (2**24 with 128 MiB bindings)."""
    return 1 << ((max_binding_bytes() // 8).bit_length() - 1)


def _keys_source(dtype: torch.dtype) -> str:
    info = dtype_info(dtype, "sort")
    return _KEYS.format(vtype=KEY_INPUT_TYPE[info.kind], load=info.load.replace("B[", "X["),
                        key=ORDER_KEY[info.kind], rows=row_wgsl(4))


def sort_permutation(x: torch.Tensor, descending: bool) -> torch.Tensor:
    """int64 indices that stably sort each row of `x` (any strides, >= 1 dim) along its last dim."""
    n = x.shape[-1]
    located = row_words(x, "sort")
    if x.numel() == 0:
        return new_empty(x.shape, torch.int64, x)
    rows = x.numel() // n
    padded = 1 << (n - 1).bit_length()
    slots = rows * padded
    cap = max_sort_slots()
    if padded > cap:
        raise NotImplementedError(f"webgpu: sort of rows of {n} elements: one row's {padded} sort slots "
                                  f"exceed one storage binding ({cap} slots); sort shorter rows (topk of "
                                  f"such rows works, in chunks)")
    if slots > cap:  # rows in chunks whose keys fit one binding each
        flat = x.reshape(rows, n)
        per = cap // padded
        parts = [sort_permutation(flat[r:r + per], descending) for r in range(0, rows, per)]
        return torch.cat(parts).reshape(x.shape)
    if not fits_one_binding(x):   # a strided view spanning more than one binding: bind a compact copy
        x = x.contiguous()
        located = row_words(x, "sort")
    source, located[1] = windowed_binding(x)   # only x's own range of its buffer
    keys = new_empty((2 * slots,), torch.int32, x)
    index = new_empty((slots,), torch.int32, x)
    rt = get_runtime()
    unreplayable()   # launches not yet checked to replay: this call is never a launch plan
    words = [slots, n, padded, int(descending), *located]
    rt.dispatch(rt.kernel(_keys_source(x.dtype), label="sort_keys"),
                [rt.constant(pack_u32(words)), source, buffer_id(keys), buffer_id(index)],
                grid(slots, 64), label="sort_keys")
    pair = [buffer_id(keys), buffer_id(index)]
    local, step = rt.kernel(_LOCAL, label="sort_local"), rt.kernel(_GLOBAL, label="sort_step")

    def local_pass(k_first: int, k_last: int, j_first: int) -> None:
        rt.dispatch(local, [rt.constant(pack_u32([slots, padded, k_first, k_last, j_first])), *pair],
                    grid(slots, BLOCK), label="sort_local")

    if padded > 1:
        local_pass(2, min(padded, BLOCK), BLOCK // 2)
    k = 2 * BLOCK
    while k <= padded:
        j = k // 2
        while j >= BLOCK:
            rt.dispatch(step, [rt.constant(pack_u32([slots, padded, k, j])), *pair], grid(slots // 2, 256),
                        label="sort_step")
            j //= 2
        local_pass(k, k, BLOCK // 2)
        k *= 2
    # the first n slots of each padded row, widened to int64
    return index.reshape(rows, padded)[:, :n].to(torch.int64).reshape(x.shape)
