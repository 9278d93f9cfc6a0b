"""Exact cumsum of integer and bool tensors into int64 (torch's result dtype for them).

One invocation scans one row serially, adding in u32 pairs with carry (WGSL has no 64-bit integers), so
sums past 2**31 (and past float32's 2**24) stay exact. Eager GPT-2 needs this: its position ids are
`attention_mask.cumsum(-1)`.
"""

from __future__ import annotations

import torch

from ..runtime import get_runtime
from .codegen.dtypes import dtype_info
from .codegen.elementwise import grid
from .codegen.operand import pack_u32
from .rows import row_wgsl, row_words
from .tensor_buffers import buffer_id, new_empty

# WGSL turning a loaded value `v` of each compute kind into its int64 (low, high) words
_WIDEN = {
    "i32": "vec2<u32>(bitcast<u32>(v), select(0u, 0xffffffffu, v < 0))",
    "bool": "vec2<u32>(select(0u, 1u, v), 0u)",
    "i64": "v",
}
_TYPE = {"i32": "i32", "bool": "bool", "i64": "vec2<u32>"}

_CUMSUM = """
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read> X: array<u32>;
@group(0) @binding(2) var<storage, read_write> Y: array<u32>;
fn load(i: u32) -> vec2<u32> {{ let v: {vtype} = {load}; return {widen}; }}
{rows}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  // P = [rows, len, row words (ops/rows.py)]
  let r = gid.x + gid.y * nwg.x * 64u;
  if (r >= P[0]) {{ return; }}
  let base = row_start(r);
  var acc = vec2<u32>(0u, 0u);
  for (var i = 0u; i < P[1]; i++) {{
    let a = load(base + i * row_step());
    let lo = acc.x + a.x;
    acc = vec2<u32>(lo, acc.y + a.y + select(0u, 1u, lo < acc.x));
    let o = r * P[1] + i;
    Y[2u * o] = acc.x; Y[2u * o + 1u] = acc.y;
  }}
}}
"""


def integer_cumsum(x: torch.Tensor, dim: int) -> torch.Tensor:
    """int64 cumsum of an integer or bool webgpu tensor along `dim` (contiguous result)."""
    info = dtype_info(x.dtype, "cumsum")
    if info.kind not in _WIDEN:
        raise TypeError(f"webgpu: integer cumsum of {x.dtype}: expected an integer or bool tensor")
    src = x if x.dim() else x.reshape(1)
    dim = dim % src.dim()
    moved = src.movedim(dim, -1)
    located = row_words(moved, "cumsum")
    y = new_empty(moved.shape, torch.int64, x)
    if y.numel():
        rows = y.numel() // moved.shape[-1]
        words = [rows, moved.shape[-1], *located]
        wgsl = _CUMSUM.format(vtype=_TYPE[info.kind], load=info.load.replace("B[", "X["),
                              widen=_WIDEN[info.kind], rows=row_wgsl(2))
        rt = get_runtime()
        rt.dispatch(rt.kernel(wgsl, label="cumsum_int"),
                    [rt.constant(pack_u32(words)), buffer_id(moved), buffer_id(y)], grid(rows, 64),
                    label="cumsum_int")
    return y.movedim(-1, dim).contiguous().reshape(x.shape)
