"""complex64 on the webgpu device: a complex element is a (real, imag) pair of float32 in the buffer.

The C++ allocator accepts complex64; copies (ops/copy.py) and fills (ops/factories.py) work on the
float32 views made here, resolving conjugate bits (so _copy_from also takes conjugated tensors);
torch.fft (ops/fft.py) transforms such pairs.
`view_as_real` / `view_as_complex` are metadata only: the same storage seen with the other dtype
(torch's CPU kernels of these views are not composite, so the device needs its own).
"""

from __future__ import annotations

import torch

from . import copy
from .registry import register

# A conjugated (negated) tensor dispatches through the Conjugate (Negative) key, whose fallback would
# materialise it with a copy, i.e. with _copy_from again (endless recursion). The device's copies resolve
# conjugate and negative bits themselves (ops/copy.py), so they take such tensors as they are.
_CONJUGATE = torch.library.Library("aten", "IMPL", "Conjugate")  # noqa: TOR901 (kept for the process)
_CONJUGATE.impl("_copy_from", copy._copy_from)
_CONJUGATE.impl("_copy_from_and_resize", copy._copy_from_and_resize)
_NEGATIVE = torch.library.Library("aten", "IMPL", "Negative")  # noqa: TOR901 (the same for negative bits)
_NEGATIVE.impl("_copy_from", copy._copy_from)
_NEGATIVE.impl("_copy_from_and_resize", copy._copy_from_and_resize)


def _alias(t: torch.Tensor, dtype: torch.dtype, offset: int, sizes, strides) -> torch.Tensor:
    """A tensor of `dtype` over t's storage with the given element geometry (no copy)."""
    out = torch.empty(0, dtype=dtype, device=t.device)
    return out.set_(t.untyped_storage(), offset, tuple(sizes), tuple(strides))


@register("view_as_real", planned=False)
def view_as_real(self):
    """torch.view_as_real: a complex64 tensor's float32 (real, imag) pairs as a [..., 2] view."""
    if self.dtype != torch.complex64:
        raise RuntimeError(f"view_as_real is only supported for complex tensors (webgpu: complex64), got "
                           f"{self.dtype}")
    if self.is_conj():
        raise RuntimeError("view_as_real doesn't work on unresolved conjugated tensors.  To resolve the "
                           "conjugate tensor so you can view it as real, use self.resolve_conj()")
    return _alias(self, torch.float32, 2 * self.storage_offset(), (*self.shape, 2),
                  (*(2 * s for s in self.stride()), 1))


@register("view_as_complex", planned=False)
def view_as_complex(self):
    """torch.view_as_complex: float32 [..., 2] pairs (last stride 1, others even) as complex64."""
    if self.dtype != torch.float32:
        raise RuntimeError(f"view_as_complex is only supported for float32 tensors on webgpu, got "
                           f"{self.dtype}")
    if self.dim() == 0 or self.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    if self.stride(-1) != 1:
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    if any(s % 2 for s in self.stride()[:-1]) or self.storage_offset() % 2:
        raise RuntimeError("Tensor must have a stride divisible by 2 for all but last dimension")
    return _alias(self, torch.complex64, self.storage_offset() // 2, self.shape[:-1],
                  tuple(s // 2 for s in self.stride()[:-1]))


@register("conj_physical.out", planned=False)
def conj_physical_out(self, *, out):
    """torch.conj_physical(out=): the conjugated values materialised (a copy for real tensors)."""
    value = self.conj() if self.is_complex() else self
    out.resize_(self.shape)
    copy.copy_on_device(value, out)
    return out


def _pairs_out(out: torch.Tensor, shape) -> torch.Tensor:
    """out resized to `shape` (complex64), as its float32 (real, imag) view."""
    if out.dtype != torch.complex64:
        raise TypeError(f"webgpu: expected a complex64 out= tensor, got {out.dtype}")
    out.resize_(shape)
    return torch.view_as_real(out)


@register("complex.out", planned=False)
def complex_out(real, imag, *, out):
    """torch.complex(out=): real and imaginary float32 parts into complex64 pairs."""
    if real.dtype != torch.float32 or imag.dtype != torch.float32:
        raise TypeError(f"webgpu: torch.complex supports float32 parts (complex64), got {real.dtype}, "
                        f"{imag.dtype}")
    shape = torch.broadcast_shapes(real.shape, imag.shape)
    pairs = _pairs_out(out, shape)
    copy.copy_on_device(real.expand(shape), pairs[..., 0])
    copy.copy_on_device(imag.expand(shape), pairs[..., 1])
    return out


@register("polar.out", planned=False)
def polar_out(abs, angle, *, out):  # noqa: A002 (aten's argument names)
    """torch.polar(out=): abs * (cos(angle), sin(angle))."""
    shape = torch.broadcast_shapes(abs.shape, angle.shape)
    pairs = _pairs_out(out, shape)
    copy.copy_on_device((abs * torch.cos(angle)).expand(shape), pairs[..., 0])
    copy.copy_on_device((abs * torch.sin(angle)).expand(shape), pairs[..., 1])
    return out


def _angle(x: torch.Tensor) -> torch.Tensor:
    if x.is_complex():
        pairs = torch.view_as_real(x.resolve_conj())
        return torch.atan2(pairs[..., 1], pairs[..., 0])
    if not x.is_floating_point():
        x = x.to(torch.float32)
    # real numbers: pi for negatives, 0 otherwise, NaN stays NaN
    return torch.where(torch.isnan(x), x, torch.where(x < 0, torch.pi, 0.0).to(x.dtype))


@register("angle", planned=False)
def angle(self):
    """torch.angle: the argument of complex values (pi / 0 for negative / other reals)."""
    return _angle(self)


@register("angle.out", planned=False)
def angle_out(self, *, out):
    """torch.angle(out=)."""
    value = _angle(self)
    out.resize_(value.shape)
    return out.copy_(value)
