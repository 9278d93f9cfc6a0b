"""grid_sampler_2d / grid_sampler_3d (bilinear, nearest, 2-d bicubic; zeros, border, reflection padding)
composed from device elementwise ops and one gather per tap, with the CPU kernel's coordinate formulas."""

from __future__ import annotations

import itertools

import torch

from .registry import register

_BILINEAR, _NEAREST, _BICUBIC = 0, 1, 2
_ZEROS, _BORDER, _REFLECTION = 0, 1, 2
_A = -0.75


def _unnormalize(c, size: int, align_corners: bool):
    if align_corners:
        return (c + 1) / 2 * (size - 1)
    return ((c + 1) * size - 1) / 2


def _reflect(c, twice_low: int, twice_high: int):
    if twice_low == twice_high:
        return torch.zeros_like(c)
    lo = twice_low / 2
    span = (twice_high - twice_low) / 2
    c = (c - lo).abs()
    extra = torch.fmod(c, span)
    flips = torch.floor(c / span)
    even = torch.remainder(flips, 2) == 0
    return torch.where(even, extra + lo, span - extra + lo)


def _pad(c, size: int, padding: int, align_corners: bool):
    """The source coordinate after the padding mode (border/reflection clamp into the image)."""
    if padding == _BORDER:
        return c.clamp(0, size - 1)
    if padding == _REFLECTION:
        c = _reflect(c, 0, 2 * (size - 1)) if align_corners else _reflect(c, -1, 2 * size - 1)
        return c.clamp(0, size - 1)
    return c


def _gather(flat, idx_list, sizes, n: int, ch: int):
    """Values of flat (N, C, P) at integer coordinates idx_list (one (N, Q) int tensor per spatial dim,
    outermost first); taps outside the image read 0. Returns (N, C, Q)."""
    inside = None
    lin = None
    for idx, size in zip(idx_list, sizes, strict=True):
        ok = (idx >= 0) & (idx < size)
        inside = ok if inside is None else inside & ok
        safe = idx.clamp(0, size - 1)
        lin = safe if lin is None else lin * size + safe
    vals = flat.gather(2, lin.to(torch.int64).unsqueeze(1).expand(n, ch, lin.shape[1]))
    return vals * inside.unsqueeze(1).to(vals.dtype)


def _cubic_weights(t):
    def near(x):
        return ((_A + 2) * x - (_A + 3)) * x * x + 1

    def far(x):
        return ((_A * x - 5 * _A) * x + 8 * _A) * x - 4 * _A

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _grid_sample(inp, grid, mode: int, padding: int, align_corners: bool, k: int):
    n, ch = inp.shape[:2]
    sizes = list(inp.shape[2:])  # outermost (D/H) first
    out_sp = list(grid.shape[1:-1])
    q = 1
    for s in out_sp:
        q *= s
    flat = inp.reshape(n, ch, -1)
    g = grid.reshape(n, q, k)
    # grid[..., 0] is x (the innermost dim), so spatial dim d uses component k - 1 - d
    raw = [_unnormalize(g[:, :, k - 1 - d], sizes[d], align_corners) for d in range(k)]
    if mode == _BICUBIC:
        base = [torch.floor(c) for c in raw]
        ts = [c - b for c, b in zip(raw, base, strict=True)]
        wy, wx = _cubic_weights(ts[0]), _cubic_weights(ts[1])
        out = None
        for i in range(4):
            row = None
            for j in range(4):
                cy = _pad(base[0] - 1 + i, sizes[0], padding, align_corners)
                cx = _pad(base[1] - 1 + j, sizes[1], padding, align_corners)
                v = _gather(flat, [cy.to(torch.int32), cx.to(torch.int32)], sizes, n, ch)
                term = v * wx[j].unsqueeze(1)
                row = term if row is None else row + term
            term = row * wy[i].unsqueeze(1)
            out = term if out is None else out + term
        return out.reshape(n, ch, *out_sp)
    coords = [_pad(c, s, padding, align_corners) for c, s in zip(raw, sizes, strict=True)]
    if mode == _NEAREST:
        idx = [torch.round(c).to(torch.int32) for c in coords]  # round half to even, like nearbyint
        return _gather(flat, idx, sizes, n, ch).reshape(n, ch, *out_sp)
    lo = [torch.floor(c) for c in coords]
    out = None
    # corners with x varying fastest, as the CPU sums them (nw, ne, sw, se; then the far z plane)
    for bits in itertools.product((0, 1), repeat=k):
        w = None
        for d in reversed(range(k)):
            f = (coords[d] - lo[d]) if bits[d] else (lo[d] + 1 - coords[d])
            w = f if w is None else w * f
        idx = [(lo[d] + bits[d]).to(torch.int32) for d in range(k)]
        term = _gather(flat, idx, sizes, n, ch) * w.unsqueeze(1)
        out = term if out is None else out + term
    return out.reshape(n, ch, *out_sp)


def _check(inp, grid, k: int, mode: int, op: str):
    if inp.dim() != k + 2 or grid.dim() != k + 2 or grid.shape[-1] != k:
        raise RuntimeError(f"{op}: expected {k + 2}-D input and grid with last dim {k}, got input "
                           f"{list(inp.shape)} and grid {list(grid.shape)}")
    if inp.shape[0] != grid.shape[0]:
        raise RuntimeError(f"{op}: expected grid and input to have same batch size, but got input with sizes "
                           f"{list(inp.shape)} and grid with sizes {list(grid.shape)}")
    if mode not in (_BILINEAR, _NEAREST) and not (k == 2 and mode == _BICUBIC):
        raise RuntimeError(f"{op}: interpolation mode {mode} is not supported")


@register("grid_sampler_2d")
def grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners):  # noqa: A002
    """aten.grid_sampler_2d."""
    _check(input, grid, 2, interpolation_mode, "grid_sampler_2d")
    if input.numel() == 0 or grid.numel() == 0:
        return torch.zeros((input.shape[0], input.shape[1], *grid.shape[1:3]), dtype=input.dtype,
                           device=input.device)
    return _grid_sample(input, grid, interpolation_mode, padding_mode, align_corners, 2)


@register("grid_sampler_3d")
def grid_sampler_3d(input, grid, interpolation_mode, padding_mode, align_corners):  # noqa: A002
    """aten.grid_sampler_3d."""
    _check(input, grid, 3, interpolation_mode, "grid_sampler_3d")
    if input.numel() == 0 or grid.numel() == 0:
        return torch.zeros((input.shape[0], input.shape[1], *grid.shape[1:4]), dtype=input.dtype,
                           device=input.device)
    return _grid_sample(input, grid, interpolation_mode, padding_mode, align_corners, 3)
