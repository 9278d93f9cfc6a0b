"""embedding_bag (sum / mean / max of the embedding rows of each bag) from device gathers and
index_add / scatter_reduce over the bag id of every index (bag ids by a search over the offsets)."""

from __future__ import annotations

import torch

from .registry import register

_SUM, _MEAN, _MAX = 0, 1, 2


def _bags(indices, offsets, include_last_offset):
    n = indices.numel()
    nbags = offsets.numel() - 1 if include_last_offset else offsets.numel()
    starts = offsets[:nbags] if include_last_offset else offsets
    # a 1 at every bag start (starts past the end land in a spare slot), prefix-summed into bag ids
    marks = torch.zeros(n + 1, dtype=torch.int32, device=indices.device)
    if starts.numel():
        marks.index_add_(0, starts.to(torch.int64).clamp(0, n), torch.ones_like(starts, dtype=torch.int32))
    bag = marks[:n].cumsum(0, dtype=torch.int32) - 1
    return bag.clamp_min(0).to(torch.int64), nbags


def embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    """aten._embedding_bag -> (output, offset2bag, bag_size, max_indices)."""
    if indices.dim() != 1 or offsets.dim() != 1:
        raise RuntimeError(f"embedding_bag: expected 1-D indices and offsets, got {indices.dim()}-D and "
                           f"{offsets.dim()}-D")
    if per_sample_weights is not None and mode != _SUM:
        raise NotImplementedError("embedding_bag: per_sample_weights only supported with mode='sum'")
    dim = weight.shape[1]
    idx = indices.to(torch.int64)
    bag, nbags = _bags(idx, offsets, include_last_offset)
    if padding_idx is not None and padding_idx >= 0:
        valid = idx != padding_idx
    else:
        valid = torch.ones_like(idx, dtype=torch.bool)
    rows = weight.index_select(0, torch.where(valid, idx, torch.zeros_like(idx))) if idx.numel() else \
        torch.zeros((0, dim), dtype=weight.dtype, device=weight.device)
    counts = torch.zeros(nbags, dtype=torch.int32, device=weight.device)
    if idx.numel():
        counts.index_add_(0, bag, valid.to(torch.int32))
    bag_size = counts.to(torch.int64)
    max_shape = (nbags, dim) if mode == _MAX else (nbags,)
    max_indices = torch.zeros(max_shape, dtype=torch.int64, device=weight.device)
    out = torch.zeros((nbags, dim), dtype=weight.dtype, device=weight.device)
    if idx.numel() == 0 or nbags == 0:
        return out, bag, bag_size, max_indices
    keep = valid.unsqueeze(1).to(weight.dtype)
    if mode == _MAX:
        neg = torch.full_like(rows, float("-inf"))
        masked = torch.where(valid.unsqueeze(1), rows, neg)
        out = out.scatter_reduce(0, bag.unsqueeze(1).expand(-1, dim), masked, "amax", include_self=False)
        empty = (counts == 0).unsqueeze(1)
        out = torch.where(empty, torch.zeros_like(out), out)
        # the first position holding each bag's max, as the CPU's strict '>' scan keeps
        hit = valid.unsqueeze(1) & (rows == out.index_select(0, bag))
        n = idx.numel()
        pos = torch.arange(n, dtype=torch.float32, device=weight.device).unsqueeze(1).expand(-1, dim)
        first = torch.full((nbags, dim), float(n), device=weight.device)
        first = first.scatter_reduce(0, bag.unsqueeze(1).expand(-1, dim),
                                     torch.where(hit, pos, torch.full_like(pos, float(n))), "amin")
        first = first.clamp_max(n - 1).to(torch.int64)
        max_indices = torch.where(empty, torch.zeros_like(first), idx.index_select(0, first.reshape(-1))
                                  .reshape(nbags, dim))
        return out, bag, bag_size, max_indices
    # sums accumulate in float32 and round once, as the CPU does for reduced-precision weights
    vals = rows.float() * keep.float()
    if per_sample_weights is not None:
        vals = vals * per_sample_weights.reshape(-1, 1).float()
    acc = torch.zeros((nbags, dim), dtype=torch.float32, device=weight.device)
    acc.index_add_(0, bag, vals)
    if mode == _MEAN:
        acc = acc / counts.clamp_min(1).unsqueeze(1).float()
    return acc.to(weight.dtype), bag, bag_size, max_indices


register("_embedding_bag")(embedding_bag)


@register("_embedding_bag_forward_only")
def embedding_bag_forward_only(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                               per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    """aten._embedding_bag_forward_only (the same outputs, no autograd)."""
    return embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights,
                         include_last_offset, padding_idx)
