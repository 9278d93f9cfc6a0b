"""Elementwise arithmetic on complex64 webgpu tensors (add, sub, mul, div, neg, abs), computed on their
float32 (real, imag) views with the real kernels; ops/elementwise.py hands complex operands here.

A real operand has no imaginary part (None below), so mixed real/complex products cost no extra work.
Division multiplies by the conjugate over |b|^2 (no Smith scaling: |b|^2 may overflow past 1.8e19).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .copy import copy_on_device

SUPPORTED = ("add", "sub", "mul", "div", "neg", "abs")

Parts = tuple  # (real, imag or None): tensors or Python numbers


def _parts(x) -> Parts:
    if isinstance(x, torch.Tensor):
        if not x.is_complex():
            return x.to(torch.float32), None
        pairs = torch.view_as_real(x.resolve_conj())
        return pairs[..., 0], pairs[..., 1]
    z = complex(x)
    return z.real, (z.imag if z.imag else None)


def _mul(a: Parts, b: Parts) -> Parts:
    (ar, ai), (br, bi) = a, b
    real = ar * br if ai is None or bi is None else ar * br - ai * bi
    if ai is None and bi is None:
        return real, None
    imag = ar * bi if ai is None else (ai * br if bi is None else ar * bi + ai * br)
    return real, imag


def _add(a: Parts, b: Parts, sign: float = 1.0) -> Parts:
    (ar, ai), (br, bi) = a, b
    imag = ai if bi is None else (sign * bi if ai is None else ai + sign * bi)
    return ar + sign * br, imag


def _div(a: Parts, b: Parts) -> Parts:
    br, bi = b
    if bi is None:
        return a[0] / br, (None if a[1] is None else a[1] / br)
    norm = br * br + bi * bi
    real, imag = _mul(a, (br, -bi))
    return real / norm, imag / norm


def _compute(op: str, values: Sequence, params: dict) -> Parts:
    parts = [_parts(v) for v in values]
    if op in ("add", "sub"):
        alpha = params.get("alpha")
        other = parts[1] if alpha in (None, 1) else _mul(parts[1], _parts(alpha))
        return _add(parts[0], other, 1.0 if op == "add" else -1.0)
    if op == "mul":
        return _mul(parts[0], parts[1])
    if op == "div":
        return _div(parts[0], parts[1])
    if op == "neg":
        real, imag = parts[0]
        return -real, (None if imag is None else -imag)
    real, imag = parts[0]  # abs
    return (torch.hypot(real, imag) if imag is not None else real.abs()), None


def elementwise(op: str, values: Sequence, params: dict, out: torch.Tensor | None,
                inplace: torch.Tensor | None) -> torch.Tensor:
    """The table op `op` on complex operands; the result goes to out= / the in-place tensor if given."""
    if op not in SUPPORTED:
        raise TypeError(f"webgpu: '{op}' does not support complex64 yet (complex64 has "
                        f"{', '.join(SUPPORTED)}, fft, views and copies; view_as_real gives the float32 "
                        f"pairs)")
    tensors = [v for v in values if isinstance(v, torch.Tensor)]
    shape = torch.broadcast_shapes(*(t.shape for t in tensors))
    real, imag = _compute(op, values, params)
    device = tensors[0].device
    real = torch.as_tensor(real, dtype=torch.float32, device=device).expand(shape)
    if op == "abs":
        result = real
    else:
        imag = torch.zeros((), device=device) if imag is None else torch.as_tensor(imag, device=device)
        result = torch.view_as_complex(torch.stack([real, imag.expand(shape)], dim=-1).contiguous())
    target = inplace if inplace is not None else out
    if target is None:
        return result.contiguous() if op == "abs" else result
    if target is out and tuple(out.shape) != tuple(shape):
        out.resize_(shape)
    copy_on_device(result, target)
    return target
