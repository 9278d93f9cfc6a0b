"""sort / argsort / topk / median / kthvalue on the device through a stable bitonic sort (ops/bitonic.py):
the sort yields each row's permutation, and the values are gathered with it in the input's own dtype."""

from __future__ import annotations

import torch

from .bitonic import max_sort_slots, sort_permutation
from .out_args import out_variant
from .registry import register


def _sort(self, dim: int, descending: bool):
    x = self if self.dim() else self.reshape(1)
    dim = dim % x.dim()
    moved = x.movedim(dim, -1)
    indices = sort_permutation(moved, descending)
    values = torch.gather(moved, -1, indices) if moved.numel() else torch.empty_like(moved)
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


@register("topk")
def topk(self, k, dim=-1, largest=True, sorted=True):  # noqa: A002
    """torch.topk (the first k of a stable sort)."""
    size = self.shape[dim] if self.dim() else 1
    if k < 0 or k > size:
        raise RuntimeError("selected index k out of range")
    if self.dim() and size > max_sort_slots() and 0 < k <= max_sort_slots() // 2:
        return _topk_of_chunks(self, k, dim % self.dim(), largest)
    v, i = _sort(self, dim, largest)
    d = dim % max(self.dim(), 1)
    if self.dim() == 0:
        return v, i
    return v.narrow(d, 0, k).contiguous(), i.narrow(d, 0, k).contiguous()


def _topk_of_chunks(self, k: int, dim: int, largest: bool):
    """topk of rows longer than one sort (their keys exceed one binding): the top k of each chunk, then
    the top k of those candidates. Candidates keep chunk order, so ties still resolve to the lower index
    as one stable sort would."""
    chunk = max_sort_slots()
    moved = self.movedim(dim, -1)
    values, indices = [], []
    for start in range(0, moved.shape[-1], chunk):
        part = moved[..., start:start + chunk]
        v, i = topk(part, min(k, part.shape[-1]), -1, largest)
        values.append(v)
        indices.append(i + start)
    v, pos = topk(torch.cat(values, -1), k, -1, largest)
    i = torch.gather(torch.cat(indices, -1), -1, pos)
    return v.movedim(-1, dim).contiguous(), i.movedim(-1, dim).contiguous()


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


def _median(self, dim: int, keepdim: bool, skip_nan: bool = False):
    op = "nanmedian" if skip_nan else "median"
    if self.dim() == 0:
        return self.clone(), torch.zeros((), dtype=torch.int64, device=self.device)
    d = dim % self.dim()
    n = self.shape[d]
    if n == 0:
        raise IndexError(f"{op}(): Expected reduction dim to have non-zero size.")
    if not self.dtype.is_floating_point:
        return _pick(self, d, keepdim, (n - 1) // 2)
    nans = torch.isnan(self).to(torch.float32).sum(d)
    if skip_nan:  # the lower middle of the non-NaN values (NaNs sort last); all NaN: the first NaN
        pos = torch.floor((n - nans - 1) / 2).clamp_min(0)
    else:  # NaN propagates: a row with NaNs yields its first NaN (NaNs sort last, stably)
        pos = torch.where(nans > 0, n - nans, torch.full_like(nans, (n - 1) // 2))
    return _pick(self, d, keepdim, pos.to(torch.int64))


@register("median.dim")
def median_dim(self, dim, keepdim=False):
    """torch.median(dim=) -> (values, indices)."""
    return _median(self, dim, keepdim)


@register("median")
def median(self):
    """torch.median() of all elements."""
    if self.numel() == 0:
        return torch.full((), float("nan"), dtype=self.dtype, device=self.device)
    return _median(self.reshape(-1), 0, False)[0]


@register("nanmedian.dim")
def nanmedian_dim(self, dim, keepdim=False):
    """torch.nanmedian(dim=) -> (values, indices)."""
    return _median(self, dim, keepdim, skip_nan=True)


@register("nanmedian")
def nanmedian(self):
    """torch.nanmedian() of all elements."""
    if self.numel() == 0:
        return torch.full((), float("nan"), dtype=self.dtype, device=self.device)
    return _median(self.reshape(-1), 0, False, skip_nan=True)[0]


@register("kthvalue")
def kthvalue(self, k, dim=-1, keepdim=False):
    """torch.kthvalue."""
    n = self.shape[dim] if self.dim() else 1
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {dim}")
    return _pick(self, dim, keepdim, k - 1)


# out= overloads: the functional kernel's results written into the given tensors
register("sort.values_stable")(out_variant(sort_stable, "values", "indices"))
register("sort.values")(out_variant(sort, "values", "indices"))
register("topk.values")(out_variant(topk, "values", "indices"))
register("median.dim_values")(out_variant(median_dim, "values", "indices"))
register("nanmedian.dim_values")(out_variant(nanmedian_dim, "values", "indices"))
register("kthvalue.values")(out_variant(kthvalue, "values", "indices"))
