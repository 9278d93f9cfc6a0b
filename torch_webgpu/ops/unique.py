"""unique / unique_consecutive (flat or along a dim) on the device; the number of groups is read back,
as for nonzero.

Runs of equal elements (or equal slices along `dim`) are groups: after a stable sort for unique, as they
come for unique_consecutive. A group starts where an element differs from its predecessor (NaN differs
from everything, as on the CPU); the group id of each element is the exact int64 cumsum of those starts
minus one, which is the inverse (scattered back through the sort permutation); counts are the distances
between group starts. Slices along a dim sort lexicographically by stable sorts from the last column to
the first (LSD order).
"""

from __future__ import annotations

import torch

from .registry import register


def _starts(rows: torch.Tensor) -> torch.Tensor:
    """bool [n]: row i starts a new group (differs from row i - 1); rows is [n, m]."""
    first = torch.ones(1, dtype=torch.bool, device=rows.device)
    if rows.shape[0] < 2:
        return first.expand(rows.shape[0]).clone()
    differs = rows[1:] != rows[:-1]
    if rows.dtype.is_floating_point:  # NaN differs from everything; WGSL's != may say otherwise on NaN
        nan = torch.isnan(rows)
        differs = differs | nan[1:] | nan[:-1]
    differs = differs.any(1) if rows.shape[1] else torch.zeros(rows.shape[0] - 1, dtype=torch.bool,
                                                                device=rows.device)
    return torch.cat([first, differs])


def _groups(rows: torch.Tensor, return_counts: bool):
    """(group start positions, group id of each row, counts or None) of consecutive equal rows."""
    starts = _starts(rows)
    ids = torch.cumsum(starts, 0) - 1
    first = torch.nonzero(starts).reshape(-1)  # reads the number of groups back
    counts = None
    if return_counts:
        end = torch.full((1,), rows.shape[0], dtype=torch.int64, device=rows.device)
        counts = torch.cat([first[1:], end]) - first
    return first, ids, counts


def _lexsort(rows: torch.Tensor) -> torch.Tensor:
    """The stable permutation sorting the rows of [n, m] lexicographically."""
    perm = torch.arange(rows.shape[0], device=rows.device)
    for col in reversed(range(rows.shape[1])):
        key = rows[:, col].index_select(0, perm)
        perm = perm.index_select(0, torch.sort(key, stable=True).indices)
    return perm


def _unique(x: torch.Tensor, dim: int | None, sort: bool, return_inverse: bool, return_counts: bool):
    if dim is None:
        rows, shape = x.reshape(-1, 1), None
    else:
        if x.dim() == 0:
            raise IndexError("unique: dim given for a 0-d tensor")
        dim = dim % x.dim()
        moved = x.movedim(dim, 0)
        rows, shape = moved.reshape(moved.shape[0], -1), moved.shape
    n = rows.shape[0]
    empty = torch.empty(0, dtype=torch.int64, device=x.device)
    if n == 0:
        values = x.reshape(-1) if dim is None else x
        inverse = torch.zeros(x.shape if dim is None else (0,), dtype=torch.int64, device=x.device)
        return values.clone(), inverse, empty
    perm = None
    if sort:
        perm = torch.sort(rows[:, 0], stable=True).indices if rows.shape[1] == 1 else _lexsort(rows)
        rows = rows.index_select(0, perm)
    first, ids, counts = _groups(rows, return_counts)
    picked = rows.index_select(0, first)
    if dim is None:
        values = picked.reshape(-1)
    else:
        values = picked.reshape(first.shape[0], *shape[1:]).movedim(0, dim).contiguous()
    inverse = empty
    if return_inverse:
        if perm is not None:  # back to each element's place, in int32 (ids < n; no int64 scatter)
            ids = torch.empty(n, dtype=torch.int32, device=x.device).scatter_(0, perm, ids.to(torch.int32))
        inverse = ids.to(torch.int64)
        inverse = inverse.reshape(x.shape) if dim is None else inverse
    return values, inverse, counts if counts is not None else empty


@register("_unique2")
def unique2(self, sorted=True, return_inverse=False, return_counts=False):  # noqa: A002
    """torch.unique (flat): sorted values, inverse indices, counts."""
    return _unique(self, None, True, return_inverse, return_counts)


@register("unique_dim")
def unique_dim(self, dim, sorted=True, return_inverse=False, return_counts=False):  # noqa: A002
    """torch.unique(dim=): unique slices along dim, sorted lexicographically."""
    return _unique(self, dim, True, return_inverse, return_counts)


@register("unique_consecutive")
def unique_consecutive(self, return_inverse=False, return_counts=False, dim=None):
    """torch.unique_consecutive (flat or along dim)."""
    return _unique(self, dim, False, return_inverse, return_counts)
