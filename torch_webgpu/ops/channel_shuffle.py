"""channel_shuffle: the (groups, C/groups) channel grid transposed, a view permutation plus one copy."""

from __future__ import annotations

from .out_args import write_out
from .registry import register


@register("channel_shuffle")
def channel_shuffle(self, groups):
    """aten.channel_shuffle: (N, g, C/g, *) -> (N, C/g, g, *) -> (N, C, *)."""
    if groups <= 0:
        raise RuntimeError("Number of groups to divide channels in must be positive. "
                           f"Value of groups:{groups}")
    if self.dim() < 3:
        raise RuntimeError(f"channel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"{self.dim()} dimension(s)")
    c = self.shape[1]
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and "
                           f"{groups} groups.")
    n, rest = self.shape[0], tuple(self.shape[2:])
    grid = self.reshape(n, groups, c // groups, *rest).transpose(1, 2)
    return grid.contiguous().reshape(self.shape)


@register("channel_shuffle.out")
def channel_shuffle_out(self, groups, *, out):
    """aten.channel_shuffle (out=)."""
    return write_out(out, channel_shuffle(self, groups))
