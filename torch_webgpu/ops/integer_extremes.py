"""Exact max/min/argmax/argmin of int32 and int64 tensors (f32 reductions would round past 2**24).

Values are compared through the 64-bit order keys of the bitonic sort (ops/bitonic.py); one workgroup
reduces one output row: each invocation scans a strided share of the row, then a tree in workgroup memory
keeps the best (key, index) pair — ties go to the smaller index, so argmax/argmin return the first
occurrence, as torch does. The values are gathered with the winning indices in the input's dtype.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..runtime import get_runtime
from ..runtime.capture import unreplayable
from .bitonic import KEY_INPUT_TYPE, ORDER_KEY
from .codegen.dtypes import dtype_info
from .codegen.elementwise import grid
from .codegen.operand import pack_u32
from .rows import row_wgsl, row_words
from .tensor_buffers import buffer_id, new_empty

EXACT_INT = (torch.int32, torch.int64)  # the integer dtypes f32 reductions cannot hold exactly
SPECS = {"amax": False, "max": False, "argmax": False, "amin": True, "min": True, "argmin": True}

_WG = 64
_ARG = """
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read> X: array<u32>;
@group(0) @binding(2) var<storage, read_write> O: array<u32>;
var<workgroup> S: array<vec3<u32>, {wg}u>;
fn load(i: u32) -> {vtype} {{ return {load}; }}
fn key(v: {vtype}) -> vec2<u32> {{{key}
}}
{rows}
fn better(a: vec3<u32>, b: vec3<u32>) -> bool {{
  if (a.x != b.x) {{ return a.x > b.x; }}
  if (a.y != b.y) {{ return a.y > b.y; }}
  return a.z < b.z;
}}
@compute @workgroup_size({wg})
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {{
  // P = [rows, len, smallest, row words (ops/rows.py)]
  let row = wid.x + wid.y * nwg.x;
  if (row >= P[0]) {{ return; }}
  let base = row_start(row);
  var best = vec3<u32>(0u, 0u, 0xffffffffu);
  for (var q = lid.x; q < P[1]; q += {wg}u) {{
    var k = key(load(base + q * row_step()));
    if (P[2] != 0u) {{ k = ~k; }}  // min: the complement key orders the smallest first
    let c = vec3<u32>(k.x, k.y, q);
    if (better(c, best)) {{ best = c; }}
  }}
  S[lid.x] = best;
  workgroupBarrier();
  for (var s = {half}u; s > 0u; s = s / 2u) {{
    if (lid.x < s) {{ let o = S[lid.x + s]; if (better(o, S[lid.x])) {{ S[lid.x] = o; }} }}
    workgroupBarrier();
  }}
  if (lid.x == 0u) {{ O[2u * row] = S[0].z; O[2u * row + 1u] = 0u; }}
}}
"""


def _source(dtype: torch.dtype) -> str:
    info = dtype_info(dtype)
    return _ARG.format(wg=_WG, half=_WG // 2, vtype=KEY_INPUT_TYPE[info.kind],
                       load=info.load.replace("B[", "X["), key=ORDER_KEY[info.kind], rows=row_wgsl(3))


def integer_extreme(spec: str, x: torch.Tensor, dims: Sequence[int], keepdim: bool):
    """(values, int64 indices) of max (spec amax/max/argmax) or min over `dims` of an integer tensor.

    Indices count positions in the reduced dims flattened row-major (one dim: the position along it)."""
    dims = tuple(dims) if x.dim() else ()
    kept = [d for d in range(x.dim()) if d not in dims]
    out_shape = tuple(1 if d in dims else x.shape[d] for d in range(x.dim()) if keepdim or d not in dims)
    outer = tuple(x.shape[d] for d in kept)
    span = 1
    for d in dims:
        span *= x.shape[d]
    rows = x.permute(tuple(kept) + dims).reshape(*outer, span)
    located = row_words(rows, spec)
    indices = new_empty(outer, torch.int64, x)
    if indices.numel() and span:
        words = [indices.numel(), span, int(SPECS[spec]), *located]
        rt = get_runtime()
        unreplayable()   # launches not yet checked to replay: this call is never a launch plan
        rt.dispatch(rt.kernel(_source(x.dtype), label=spec),
                    [rt.constant(pack_u32(words)), buffer_id(rows), buffer_id(indices)],
                    grid(indices.numel(), 1), label=spec)
    values = torch.gather(rows, -1, indices.unsqueeze(-1)).squeeze(-1) if indices.numel() else \
        new_empty(outer, x.dtype, x)
    return values.reshape(out_shape), indices.reshape(out_shape)
