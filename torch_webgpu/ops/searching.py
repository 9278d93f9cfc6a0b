"""searchsorted / bucketize (binary search per value), repeat_interleave(repeats) and embedding_renorm_."""

from __future__ import annotations

import torch

from ..kernels.wgsl import PRELUDE
from ..runtime import get_runtime
from ..runtime.capture import unreplayable
from .codegen.dtypes import convert, dtype_info
from .codegen.elementwise import grid
from .codegen.operand import pack_u32
from .out_args import write_out
from .registry import register
from .tensor_buffers import buffer_id, new_empty

_SEARCH = """
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read> S: array<u32>;
@group(0) @binding(2) var<storage, read> V: array<u32>;
@group(0) @binding(3) var<storage, read_write> O: array<u32>;
fn ls(i: u32) -> f32 {{ return {sload}; }}
fn lv(i: u32) -> f32 {{ return {vload}; }}
{prelude}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  // P = [n_values, values per row, seq len, seq rows (1 = shared), right, int64 out]
  let t = gid.x + gid.y * nwg.x * 64u;
  if (t >= P[0]) {{ return; }}
  let n = P[2];
  let base = select(0u, (t / P[1]) * n, P[3] > 1u);
  let v = lv(t);
  var lo = 0u; var hi = n;
  loop {{
    if (lo >= hi) {{ break; }}
    let mid = (lo + hi) / 2u;
    let s = ls(base + mid);
    // NaN sorts last, as in torch
    var go_right: bool;
    if (P[4] != 0u) {{ go_right = !isnan_(s) && (isnan_(v) || s <= v); }}
    else {{ go_right = !isnan_(s) && (isnan_(v) || s < v); }}
    if (go_right) {{ lo = mid + 1u; }} else {{ hi = mid; }}
  }}
  if (P[5] != 0u) {{ O[2u * t] = lo; O[2u * t + 1u] = 0u; }} else {{ O[t] = lo; }}
}}
"""

_EXACT = (torch.float32, torch.float16, torch.bfloat16, torch.int16, torch.int8, torch.uint8)


def _search(sorted_sequence, values, out_int32, right, side, sorter, out=None):
    if sorter is not None:  # positions are in the sorted order, so search the gathered sequence
        sorted_sequence = torch.gather(sorted_sequence, -1, sorter)
    if side is not None:
        right = side == "right"
    if not isinstance(values, torch.Tensor) or values.device.type != "webgpu":
        values = torch.as_tensor(values, dtype=sorted_sequence.dtype).to(sorted_sequence.device)
    for t in (sorted_sequence, values):
        if t.dtype not in _EXACT:
            raise TypeError(f"webgpu: searchsorted of {t.dtype} is not supported yet (compares in f32)")
    seq = sorted_sequence.contiguous()
    vals = values.contiguous()
    if seq.dim() > 1 and tuple(seq.shape[:-1]) != tuple(vals.shape[:-1]):
        raise RuntimeError("torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                           "dimensions of boundaries tensor and input value tensor must match")
    dtype = torch.int32 if out_int32 else torch.int64
    res = new_empty(vals.shape, dtype, vals)
    n = vals.numel()
    if n:
        si, vi = dtype_info(seq.dtype), dtype_info(vals.dtype)
        src = _SEARCH.format(sload=convert(si.load.replace("B[", "S["), si.kind, "f32"),
                             vload=convert(vi.load.replace("B[", "V["), vi.kind, "f32"), prelude=PRELUDE)
        per_row = vals.shape[-1] if vals.dim() else 1
        seq_len = seq.shape[-1] if seq.dim() else 1
        seq_rows = seq.numel() // max(seq_len, 1)
        params = [n, per_row, seq_len, seq_rows, int(bool(right)), int(not out_int32)]
        if seq.numel() == 0:
            return res.zero_() if out is None else out.resize_(res.shape).zero_()
        rt = get_runtime()
        unreplayable()   # launches not yet checked to replay: this call is never a launch plan
        rt.dispatch(rt.kernel(src, label="searchsorted"),
                    [rt.constant(pack_u32(params)), buffer_id(seq), buffer_id(vals), buffer_id(res)],
                    grid(n, 64), label="searchsorted")
    if out is not None:
        return write_out(out, res)
    return res


@register("searchsorted.Tensor", "searchsorted.Scalar")
def searchsorted(sorted_sequence, self, *, out_int32=False, right=False, side=None, sorter=None):
    """torch.searchsorted."""
    return _search(sorted_sequence, self, out_int32, right, side, sorter)


@register("searchsorted.Tensor_out", "searchsorted.Scalar_out")
def searchsorted_out(sorted_sequence, self, *, out_int32=False, right=False, side=None, sorter=None, out):
    """torch.searchsorted(out=)."""
    return _search(sorted_sequence, self, out_int32, right, side, sorter, out)


@register("bucketize.Tensor", "bucketize.Scalar")
def bucketize(self, boundaries, *, out_int32=False, right=False):
    """torch.bucketize (1-d boundaries)."""
    if boundaries.dim() != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.dim()})")
    values = self if isinstance(self, torch.Tensor) else torch.tensor(self, dtype=boundaries.dtype)
    return _search(boundaries, values.to(boundaries.device), out_int32, right, None, None)


@register("bucketize.Tensor_out", "bucketize.Scalar_out")
def bucketize_out(self, boundaries, *, out_int32=False, right=False, out):
    """torch.bucketize(out=)."""
    r = bucketize(self, boundaries, out_int32=out_int32, right=right)
    return write_out(out, r)


@register("repeat_interleave.Tensor")
def repeat_interleave(repeats, *, output_size=None):
    """torch.repeat_interleave(repeats): index i repeated repeats[i] times (total read back if unknown)."""
    if repeats.dim() != 1:
        raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
    ends = repeats.to(torch.float32).cumsum(0)
    total = int(output_size) if output_size is not None else int(ends[-1].item()) if repeats.numel() else 0
    positions = torch.arange(total, dtype=torch.float32, device=repeats.device)
    return torch.searchsorted(ends, positions, right=True)


@register("embedding_renorm_")
def embedding_renorm_(self, indices, max_norm, norm_type):
    """aten.embedding_renorm_: rows used by `indices` rescaled to at most max_norm (in place)."""
    idx = indices.reshape(-1)
    rows = torch.index_select(self, 0, idx)
    norms = torch.linalg.vector_norm(rows, norm_type, dim=1, keepdim=True)
    scale = torch.where(norms > max_norm, max_norm / (norms + 1e-7), torch.ones_like(norms))
    self.index_put_((idx,), rows * scale)
    return self
