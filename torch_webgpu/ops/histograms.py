"""histc, histogram, histogramdd, bincount: bins by a binary search over the edges, counts by scatter_add.

The edges follow torch's CPU rules: histc and integer-count histogram use linspace(min, max, bins + 1) in the
input dtype; a value x lands in the last edge <= x (upper_bound - 1), x == max goes to the last bin, and
values outside [min, max] are dropped (scattered into a spare bin that is cut off). When histc's range is
0..0 the data's own min and max are used, as device scalars (nothing is read back).
"""

from __future__ import annotations

import torch

from .out_args import write_out
from .registry import register


def _linspace_edges(lo: torch.Tensor, hi: torch.Tensor, bins: int, dtype: torch.dtype) -> torch.Tensor:
    """torch.linspace(lo, hi, bins + 1) for 0-dim device tensors, with the CPU kernel's two-sided steps."""
    idx = torch.arange(bins + 1, dtype=torch.float32, device=lo.device)
    step = (hi - lo) / bins
    edges = torch.where(idx < (bins + 1) // 2, lo + step * idx, hi - step * (bins - idx))
    return edges.to(dtype)


def _counts(x: torch.Tensor, edges: torch.Tensor, weight, bins: int, dtype) -> torch.Tensor:
    pos = torch.searchsorted(edges, x, right=True) - 1
    pos = torch.where(x == edges[-1], torch.full_like(pos, bins - 1), pos)
    inside = (x >= edges[0]) & (x <= edges[-1])
    pos = torch.where(inside, pos, torch.full_like(pos, bins)).to(torch.int64)
    src = torch.ones_like(x, dtype=dtype) if weight is None else weight.reshape(-1).to(dtype)
    hist = torch.zeros(bins + 1, dtype=dtype, device=x.device)
    hist.scatter_add_(0, pos, src)
    return hist[:bins]


@register("histc")
def histc(self, bins=100, min=0, max=0):  # noqa: A002 (aten's argument names)
    """aten.histc."""
    if bins <= 0:
        raise RuntimeError(f"torch.histc(): bins must be > 0, but got {bins} for dimension 0")
    if not self.dtype.is_floating_point:
        raise RuntimeError(f"\"histogram_cpu\" not implemented for '{self.dtype}'")
    if max < min:
        raise RuntimeError("torch.histc: max must be larger than min")
    x = self.reshape(-1)
    acc = torch.float32
    if min == max and x.numel():
        lo, hi = x.to(acc).amin(), x.to(acc).amax()
        same = lo == hi
        lo, hi = torch.where(same, lo - 1, lo), torch.where(same, hi + 1, hi)
    else:
        if not all(map(lambda v: abs(v) != float("inf") and v == v, (min, max))):
            raise RuntimeError(f"torch.histc: range of [{min}, {max}] is not finite")
        lo_v, hi_v = (min - 1, max + 1) if min == max else (min, max)
        lo = torch.tensor(float(lo_v), device=self.device)
        hi = torch.tensor(float(hi_v), device=self.device)
    edges = _linspace_edges(lo, hi, bins, self.dtype)
    return _counts(x, edges, None, bins, self.dtype)


@register("histc.out")
def histc_out(self, bins=100, min=0, max=0, *, out):  # noqa: A002
    """aten.histc (out=)."""
    return write_out(out, histc(self, bins, min, max))


@register("histogram.bins_tensor")
def histogram_bins_tensor(self, bins, *, weight=None, density=False):
    """aten.histogram with explicit (increasing) bin edges."""
    nb = bins.numel() - 1
    if nb < 1:
        raise RuntimeError("torch.histogram(): bins tensor should have at least 1 element")
    x = self.reshape(-1)
    hist = _counts(x, bins.reshape(-1), weight, nb, self.dtype)
    edges = bins.reshape(-1).clone()
    if density:
        hist = hist / (hist.sum() * (edges[1:] - edges[:-1]))
    return hist, edges


@register("histogram.bin_ct")
def histogram_bin_ct(self, bins=100, *, range=None, weight=None, density=False):  # noqa: A002
    """aten.histogram with a bin count and an optional [min, max] range."""
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    x = self.reshape(-1)
    if range is not None:
        lo_v, hi_v = float(range[0]), float(range[1])
        if lo_v > hi_v:
            raise ValueError(f"torch.histogram(): min should not exceed max, but got min {lo_v} max {hi_v}")
        if lo_v == hi_v:
            lo_v, hi_v = lo_v - 0.5, hi_v + 0.5
        lo = torch.tensor(lo_v, device=self.device)
        hi = torch.tensor(hi_v, device=self.device)
    elif x.numel():
        lo, hi = x.to(torch.float32).amin(), x.to(torch.float32).amax()
        same = lo == hi
        lo, hi = torch.where(same, lo - 0.5, lo), torch.where(same, hi + 0.5, hi)
    else:
        lo = torch.tensor(0.0, device=self.device)
        hi = torch.tensor(1.0, device=self.device)
    edges = _linspace_edges(lo, hi, bins, self.dtype)
    hist = _counts(x, edges, weight, bins, self.dtype)
    if density:
        hist = hist / (hist.sum() * (edges[1:] - edges[:-1]))
    return hist, edges


@register("histogram.bins_tensor_out")
def histogram_bins_tensor_out(self, bins, *, weight=None, density=False, hist, bin_edges):
    """aten.histogram (out=)."""
    h, e = histogram_bins_tensor(self, bins, weight=weight, density=density)
    return write_out(hist, h), write_out(bin_edges, e)


@register("histogram.bin_ct_out")
def histogram_bin_ct_out(self, bins=100, *, range=None, weight=None, density=False, hist, bin_edges):  # noqa: A002
    """aten.histogram (bin count, out=)."""
    h, e = histogram_bin_ct(self, bins, range=range, weight=weight, density=density)
    return write_out(hist, h), write_out(bin_edges, e)


@register("bincount")
def bincount(self, weights=None, minlength=0):
    """aten.bincount: the output length is data-dependent, so max(self) is read back (as on CUDA)."""
    if self.dim() != 1 or self.dtype.is_floating_point or self.dtype == torch.bool:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if weights is not None and weights.shape != self.shape:
        raise RuntimeError("weights should be 1-d and have the same length as input")
    if weights is None:
        dtype = torch.int64
    elif weights.dtype == torch.float32:
        dtype = torch.float32
    else:
        raise NotImplementedError(f"webgpu: bincount with {weights.dtype} weights gives float64, which "
                                  "WebGPU "
                                  "lacks; pass float32 weights")
    if self.numel() == 0:
        return torch.zeros(minlength, dtype=dtype, device=self.device)
    lo, hi = (int(v) for v in torch.stack([self.amin(), self.amax()]).cpu().tolist())
    if lo < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    n = max(hi + 1, minlength)
    acc = torch.int32 if weights is None else torch.float32
    src = torch.ones_like(self, dtype=acc) if weights is None else weights
    out = torch.zeros(n, dtype=acc, device=self.device)
    out.scatter_add_(0, self.to(torch.int64), src)
    return out.to(dtype)


@register("bincount.out")
def bincount_out(self, weights=None, minlength=0, *, out):
    """aten.bincount (out=)."""
    return write_out(out, bincount(self, weights, minlength))


# ---- histogramdd: N points of D coordinates (the input's last dim) ---------------------------------------

def _dd_points(self: torch.Tensor) -> torch.Tensor:
    if self.dim() < 1:
        raise RuntimeError("torch.histogramdd: input tensor should have at least 1 dimension")
    return self.reshape(-1, self.shape[-1])


def _dd_bin_edges(self, bins, range, weight) -> list[torch.Tensor]:  # noqa: A002
    """Edges per coordinate: linspace over `range` or the data's min/max (device scalars), as the CPU."""
    x = _dd_points(self)
    dims = x.shape[1]
    if len(bins) != dims:
        raise RuntimeError(f"torch.histogramdd: expected {dims} sequences of bin edges for each of the "
                           f"{dims} input dimensions, but got {len(bins)} bin edge sequences instead.")
    if range is not None and len(range) != 2 * dims:
        raise RuntimeError(f"torch.histogramdd: for a {dims}-dimensional histogram range should have "
                           f"{2 * dims} elements, but got {len(range)}")
    if range is None and x.shape[0]:
        lows, highs = x.to(torch.float32).amin(0), x.to(torch.float32).amax(0)
    edges = []
    for d, count in enumerate(bins):
        if count <= 0:
            raise RuntimeError(f"torch.histogramdd(): bins must be > 0, but got {count} for dimension {d}")
        if range is not None:
            lo_v, hi_v = float(range[2 * d]), float(range[2 * d + 1])
            if lo_v > hi_v:
                raise ValueError(f"torch.histogramdd(): min should not exceed max, but got min {lo_v} max "
                                 f"{hi_v} for dimension {d}")
            lo, hi = (torch.tensor(v, device=self.device) for v in (lo_v, hi_v))
        elif x.shape[0]:
            lo, hi = lows[d], highs[d]
        else:
            lo, hi = torch.tensor(0.0, device=self.device), torch.tensor(1.0, device=self.device)
        same = lo == hi   # an empty range widens to +-0.5 (numpy's rule, as torch)
        lo, hi = torch.where(same, lo - 0.5, lo), torch.where(same, hi + 0.5, hi)
        edges.append(_linspace_edges(lo, hi, count, self.dtype))
    return edges


def _dd_counts(self, edges, weight, density) -> torch.Tensor:
    """The D-dimensional histogram of the points over per-coordinate edges: each coordinate's bin by a
    search over its edges, one flat bin per point (points outside any edge range go to a spare bin)."""
    x = _dd_points(self)
    n, dims = x.shape
    sizes = [e.numel() - 1 for e in edges]
    flat = torch.zeros(n, dtype=torch.int64, device=self.device)
    inside = torch.ones(n, dtype=torch.bool, device=self.device)
    for d, e in enumerate(edges):
        e = e.reshape(-1)
        col = x[:, d].contiguous()
        pos = torch.searchsorted(e, col, right=True) - 1
        pos = torch.where(col == e[-1], torch.full_like(pos, sizes[d] - 1), pos)
        inside = inside & (col >= e[0]) & (col <= e[-1])
        flat = flat * sizes[d] + pos.clamp(0, max(sizes[d] - 1, 0))
    total = 1
    for s in sizes:
        total *= s
    flat = torch.where(inside, flat, torch.full_like(flat, total))
    src = torch.ones(n, dtype=self.dtype, device=self.device) if weight is None else \
        weight.reshape(-1).to(self.dtype)
    hist = torch.zeros(total + 1, dtype=self.dtype, device=self.device)
    hist.scatter_add_(0, flat, src)
    hist = hist[:total].reshape(sizes)
    if density:
        hist = hist / hist.sum()
        for d, e in enumerate(edges):
            shape = [1] * dims
            shape[d] = sizes[d]
            e = e.reshape(-1)
            hist = hist / (e[1:] - e[:-1]).reshape(shape)
    return hist


@register("_histogramdd_bin_edges")
def histogramdd_bin_edges(self, bins, *, range=None, weight=None, density=False):  # noqa: A002
    """aten._histogramdd_bin_edges: torch.histogramdd's edges for bin counts."""
    return _dd_bin_edges(self, bins, range, weight)


@register("_histogramdd_from_bin_cts")
def histogramdd_from_bin_cts(self, bins, *, range=None, weight=None, density=False):  # noqa: A002
    """aten._histogramdd_from_bin_cts: torch.histogramdd with bin counts."""
    return _dd_counts(self, _dd_bin_edges(self, bins, range, weight), weight, density)


@register("_histogramdd_from_bin_tensors")
def histogramdd_from_bin_tensors(self, bins, *, weight=None, density=False):
    """aten._histogramdd_from_bin_tensors: torch.histogramdd with explicit edges per coordinate."""
    return _dd_counts(self, list(bins), weight, density)
