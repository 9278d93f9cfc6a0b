"""sort / argsort / topk by rank counting: each element counts the elements that sort before it in its
row (stable: ties keep index order; NaN sorts as the largest value, as in torch) and writes itself to
that position. O(n^2) per row but exact, deterministic and free of atomics; fine for the row lengths
eager code sorts (a bitonic network is the upgrade path for long rows)."""

from __future__ import annotations

import torch

from ..runtime import get_runtime
from .codegen.dtypes import convert, dtype_info
from .codegen.elementwise import grid
from .codegen.operand import MAX_DIMS, pack_u32
from .codegen.wgsl_math import PRELUDE
from .elementwise import operand
from .reductions import cast_into
from .registry import register
from .tensor_buffers import buffer_id, new_empty

_EXACT = (torch.float32, torch.float16, torch.bfloat16, torch.int16, torch.int8, torch.uint8, torch.bool)

_SORT = """
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read> X: array<u32>;
@group(0) @binding(2) var<storage, read_write> V: array<f32>;
@group(0) @binding(3) var<storage, read_write> I: array<u32>;
fn lx(i: u32) -> f32 {{ return {load}; }}
{prelude}
fn before(u: f32, j: u32, v: f32, i: u32) -> bool {{
  let nu = isnan_(u); let nv = isnan_(v);
  if (nu && nv) {{ return j < i; }}
  if (u == v) {{ return j < i; }}
  {order}
}}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  // P = [total, n, n_row_dims, x_offset, x_dim_stride, row_sizes[8], row_strides[8]]
  let t = gid.x + gid.y * nwg.x * 64u;
  if (t >= P[0]) {{ return; }}
  let n = P[1];
  let row = t / n; let i = t % n;
  var base = P[3]; var rem = row;
  for (var d = i32(P[2]) - 1; d >= 0; d--) {{
    let s = P[5u + u32(d)]; base += (rem % s) * P[{rs}u + u32(d)]; rem = rem / s;
  }}
  let v = lx(base + i * P[4]);
  var rank = 0u;
  for (var j = 0u; j < n; j++) {{ if (before(lx(base + j * P[4]), j, v, i)) {{ rank++; }} }}
  let o = row * n + rank;
  V[o] = v; I[2u * o] = i; I[2u * o + 1u] = 0u;
}}
"""
_ASC = "if (nu) { return false; } if (nv) { return true; } return u < v;"
_DESC = "if (nv) { return false; } if (nu) { return true; } return u > v;"


def _sort(self, dim: int, descending: bool):
    if self.dtype not in _EXACT:
        dtype_info(self.dtype, "sort")
        raise TypeError(f"webgpu: sort of {self.dtype} is not supported yet (sorts compare in f32)")
    x = self if self.dim() else self.reshape(1)
    dim = dim % x.dim()
    moved = x.movedim(dim, -1)
    n = moved.shape[-1]
    rows_shape = moved.shape[:-1]
    if len(rows_shape) > MAX_DIMS:
        raise NotImplementedError(f"webgpu: sort supports at most {MAX_DIMS + 1} dims")
    values = new_empty(moved.shape, torch.float32, self)
    indices = new_empty(moved.shape, torch.int64, self)
    total = moved.numel()
    if total:
        info = dtype_info(self.dtype)
        src = _SORT.format(load=convert(info.load.replace("B[", "X["), info.kind, "f32"), prelude=PRELUDE,
                           order=_DESC if descending else _ASC, rs=5 + MAX_DIMS)
        o = operand(moved)
        pad = [0] * (MAX_DIMS - len(rows_shape))
        params = [total, n, len(rows_shape), o.offset, o.strides[-1], *rows_shape, *pad, *o.strides[:-1],
                  *pad]
        rt = get_runtime()
        rt.dispatch(rt.kernel(src, label="sort"), [rt.constant(pack_u32(params)), buffer_id(moved),
                                                    buffer_id(values), buffer_id(indices)], grid(total, 64),
                    label="sort")
    if self.dtype != torch.float32:
        values = cast_into(values, new_empty(values.shape, self.dtype, self))
    values, indices = values.movedim(-1, dim), indices.movedim(-1, dim)
    if self.dim() == 0:
        return values.reshape(()), indices.reshape(())
    return values.contiguous(), indices.contiguous()


@register("sort")
def sort(self, dim=-1, descending=False):
    """torch.sort (stable)."""
    return _sort(self, dim, descending)


@register("sort.stable")
def sort_stable(self, *, stable=None, dim=-1, descending=False):
    """torch.sort(stable=...)."""
    return _sort(self, dim, descending)


@register("sort.values_stable")
def sort_values_stable(self, *, stable=None, dim=-1, descending=False, values, indices):
    """torch.sort(out=(values, indices))."""
    v, i = _sort(self, dim, descending)
    values.resize_(v.shape)
    indices.resize_(i.shape)
    return values.copy_(v), indices.copy_(i)


@register("sort.values")
def sort_values(self, dim=-1, descending=False, *, values, indices):
    """torch.sort(out=(values, indices))."""
    return sort_values_stable(self, dim=dim, descending=descending, values=values, indices=indices)


@register("topk")
def topk(self, k, dim=-1, largest=True, sorted=True):  # noqa: A002
    """torch.topk (the first k of a stable sort)."""
    size = self.shape[dim] if self.dim() else 1
    if k < 0 or k > size:
        raise RuntimeError("selected index k out of range")
    v, i = _sort(self, dim, largest)
    d = dim % max(self.dim(), 1)
    if self.dim() == 0:
        return v, i
    return v.narrow(d, 0, k).contiguous(), i.narrow(d, 0, k).contiguous()


@register("topk.values")
def topk_values(self, k, dim=-1, largest=True, sorted=True, *, values, indices):  # noqa: A002
    """torch.topk(out=(values, indices))."""
    v, i = topk(self, k, dim, largest, sorted)
    values.resize_(v.shape)
    indices.resize_(i.shape)
    return values.copy_(v), indices.copy_(i)


def _pick(self, dim: int, keepdim: bool, position) -> tuple[torch.Tensor, torch.Tensor]:
    """values/indices at sorted `position` (int or per-row int64 tensor) along dim."""
    v, i = _sort(self, dim, False)
    if self.dim() == 0:
        return v, i
    d = dim % self.dim()
    if isinstance(position, int):
        pv, pi = v.narrow(d, position, 1), i.narrow(d, position, 1)
    else:
        pos = position.unsqueeze(d)
        pv, pi = torch.gather(v, d, pos), torch.gather(i, d, pos)
    if not keepdim:
        pv, pi = pv.squeeze(d), pi.squeeze(d)
    return pv.contiguous(), pi.contiguous()


def _median(self, dim: int, keepdim: bool):
    if self.dim() == 0:
        return self.clone(), torch.zeros((), dtype=torch.int64, device=self.device)
    d = dim % self.dim()
    n = self.shape[d]
    if n == 0:
        raise IndexError("median(): Expected reduction dim to have non-zero size.")
    if not self.dtype.is_floating_point:
        return _pick(self, d, keepdim, (n - 1) // 2)
    # NaN propagates: a row with NaNs yields its first NaN (NaNs sort last, stably)
    nans = torch.isnan(self).to(torch.float32).sum(d).to(torch.int64)
    pos = torch.where(nans > 0, n - nans, torch.full_like(nans, (n - 1) // 2))
    return _pick(self, d, keepdim, pos)


@register("median.dim")
def median_dim(self, dim, keepdim=False):
    """torch.median(dim=) -> (values, indices)."""
    return _median(self, dim, keepdim)


@register("median.dim_values")
def median_dim_values(self, dim, keepdim=False, *, values, indices):
    """torch.median(dim=, out=)."""
    v, i = _median(self, dim, keepdim)
    values.resize_(v.shape)
    indices.resize_(i.shape)
    return values.copy_(v), indices.copy_(i)


@register("median")
def median(self):
    """torch.median() of all elements."""
    if self.numel() == 0:
        return torch.full((), float("nan"), dtype=self.dtype, device=self.device)
    return _median(self.reshape(-1), 0, False)[0]


@register("kthvalue")
def kthvalue(self, k, dim=-1, keepdim=False):
    """torch.kthvalue."""
    n = self.shape[dim] if self.dim() else 1
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {dim}")
    return _pick(self, dim, keepdim, k - 1)


@register("kthvalue.values")
def kthvalue_values(self, k, dim=-1, keepdim=False, *, values, indices):
    """torch.kthvalue(out=)."""
    v, i = kthvalue(self, k, dim, keepdim)
    values.resize_(v.shape)
    indices.resize_(i.shape)
    return values.copy_(v), indices.copy_(i)
