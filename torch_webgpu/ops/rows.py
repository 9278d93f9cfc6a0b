"""A strided tensor seen as rows along its last dim, for kernels that walk one row per invocation or
workgroup (sort keys, integer extremes, integer scans): the parameter words that locate each row and the
WGSL that reads them.

Words, from `first` in the kernel's parameter block P: [number of row dims, element offset, stride along
the row, row sizes[8], row strides[8]].
"""

from __future__ import annotations

import torch

from .codegen.operand import MAX_DIMS
from .elementwise import operand


def row_words(t: torch.Tensor, op: str) -> list[int]:
    """The parameter words locating every row of `t` (rows along its last dim)."""
    rows_shape = tuple(t.shape[:-1])
    if len(rows_shape) > MAX_DIMS:
        raise NotImplementedError(f"webgpu: '{op}' supports at most {MAX_DIMS + 1} dims")
    o = operand(t)
    pad = [0] * (MAX_DIMS - len(rows_shape))
    return [len(rows_shape), o.offset, o.strides[-1], *rows_shape, *pad, *o.strides[:-1], *pad]


def row_wgsl(first: int) -> str:
    """WGSL `row_start(row)` (element offset of a row's first element) and `row_step()` (its stride)."""
    sizes, strides = first + 3, first + 3 + MAX_DIMS
    return f"""
fn row_start(row: u32) -> u32 {{
  var base = P[{first + 1}u]; var rem = row;
  for (var d = i32(P[{first}u]) - 1; d >= 0; d--) {{
    let s = P[{sizes}u + u32(d)]; base += (rem % s) * P[{strides}u + u32(d)]; rem = rem / s;
  }}
  return base;
}}
fn row_step() -> u32 {{ return P[{first + 2}u]; }}
"""
