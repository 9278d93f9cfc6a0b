"""Factories computed on the device (no host staging of values): fill_, zero_, arange, linspace, eye.

empty/empty_strided are C++ metadata kernels; zeros/ones/full/*_like are composites of empty + fill_.
"""

from __future__ import annotations

import math
import struct

import torch

from .dtypes import check_supported
from .producers import produce
from .registry import register
from .strided import compute_kind
from .tensor_buffers import buffer_id, byte_offset, max_binding_bytes, runtime


def _scalar_bits(value: float | int | bool, dtype: torch.dtype) -> tuple[int, int]:
    """The raw (low, high) words of `value` stored as `dtype`, computed with torch's own CPU cast."""
    host = torch.float64 if isinstance(value, float) else None  # one rounding step, as torch
    raw = torch.tensor([value], dtype=host).to(dtype).view(torch.uint8).tolist()
    raw += [0] * (8 - len(raw))
    lo, hi = struct.unpack("<II", bytes(raw))
    return lo, hi


def fill(out: torch.Tensor, value: float | int | bool) -> torch.Tensor:
    """Set every element of `out` (any strides) to `value`."""
    check_supported(out.dtype, "fill_")
    if out.numel() == 0:
        return out
    if out.is_complex():  # complex64: fill the float32 (real, imag) views
        v = complex(value)
        pairs = torch.view_as_real(out.conj() if out.is_conj() else out)
        fill(pairs[..., 0], v.real)
        fill(pairs[..., 1], -v.imag if out.is_conj() else v.imag)
        return out
    lo, hi = _scalar_bits(value, out.dtype)
    size = out.element_size()
    nbytes = out.numel() * size
    word_pattern = {4: lo, 2: lo | lo << 16, 1: lo * 0x01010101}.get(size, lo if lo == hi else None)
    # The runtime's fill binds [0, end): only while that fits one binding (clear_buffer has no limit).
    small = byte_offset(out) + nbytes <= max_binding_bytes() or word_pattern == 0
    if out.is_contiguous() and word_pattern is not None and small and not (byte_offset(out) | nbytes) % 4:
        runtime().fill(buffer_id(out), word_pattern, byte_offset(out), nbytes)
        return out
    produce(out, "  return vec2<u32>(X(0u), X(1u));", "raw", [lo, hi], f"fill_{out.dtype}")
    return out


@register("fill_.Scalar")
def fill_scalar(self: torch.Tensor, value: float | int | bool) -> torch.Tensor:
    """Tensor.fill_(number)."""
    return fill(self, value)


@register("fill_.Tensor")
def fill_tensor(self: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """Tensor.fill_(0-d tensor): a broadcast device copy (no host round trip for webgpu values)."""
    if value.dim() != 0:
        raise RuntimeError(f"fill_ only supports a 0-dimension value tensor, got {value.dim()} dims")
    if value.device.type != "webgpu":
        return fill(self, value.item())
    from .copy import copy_on_device

    copy_on_device(value.expand(self.shape), self)
    return self


@register("zero_")
def zero_(self: torch.Tensor) -> torch.Tensor:
    """Tensor.zero_()."""
    return fill(self, 0)


def _f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", float(x)))[0]


def _resize_out(out: torch.Tensor, n: int) -> None:
    if out.numel() != n or out.dim() != 1:
        out.resize_(n)


@register("arange.start_out")
def arange_out(start: float, end: float, step: float = 1, *, out: torch.Tensor) -> torch.Tensor:
    """torch.arange on the device: value i = start + i * step (f32 for floats, i32 for integers)."""
    check_supported(out.dtype, "arange")
    if step == 0:
        raise RuntimeError("arange: step must be nonzero")
    if (end - start) * step < 0 and end != start:
        raise RuntimeError("arange: upper bound and larger bound inconsistent with step sign")
    n = max(0, math.ceil((float(end) - float(start)) / float(step)))
    _resize_out(out, n)
    if compute_kind(out.dtype) in ("f",) or out.dtype.is_floating_point:
        produce(out, "  return XF(0u) + f32(li) * XF(1u);", "f", [_f32_bits(start), _f32_bits(step)],
                "arange_f32")
    else:
        for v in (start, step, start + step * max(n - 1, 0)):
            if not -(1 << 31) <= int(v) < 1 << 31:
                raise NotImplementedError("webgpu arange: integer values beyond int32 are not supported")
        produce(out, "  return XI(0u) + i32(li) * XI(1u);", "i", [int(start), int(step)], "arange_i32")
    return out


@register("linspace.out")
def linspace_out(start: float, end: float, steps: int, *, out: torch.Tensor) -> torch.Tensor:
    """torch.linspace on the device, symmetric like torch's CPU kernel (from both ends, in f32)."""
    check_supported(out.dtype, "linspace")
    if steps < 0:
        raise RuntimeError("linspace: number of steps must be non-negative")
    _resize_out(out, steps)
    if steps == 0:
        return out
    if steps == 1:  # torch's CPU kernel: [start] (its two-sided formula would give end)
        return fill(out, start)
    step = (float(end) - float(start)) / (steps - 1)
    body = ("  let n = X(3u);\n"
            "  if (li < n / 2u) { return XF(0u) + XF(2u) * f32(li); }\n"
            "  return XF(1u) - XF(2u) * f32(n - 1u - li);")
    produce(out, body, "f", [_f32_bits(start), _f32_bits(end), _f32_bits(step), steps], "linspace")
    return out


# exponent terms of logspace are split so that each product with the index halves is exact in f32
_SPLIT_BITS = 11
_LOGSPACE_HELPERS = """
var<private> whole: i32;
var<private> frac: f32;
fn add_exact(a: f32) { let r = round(a); whole += i32(r); frac += a - r; }
"""
# value(li) = base ** (x0 + i * dx): the exponent x * log2(base) is summed as an integer part and a fraction
# in [-0.5, 0.5] from terms that are exact in f32, so the result keeps f32 accuracy up to 2 ** +-126
_LOGSPACE_BODY = """
  let n = X(0u);
  var j = li; var w = 1u;
  if (li >= n / 2u) { j = n - 1u - li; w = 6u; }    // the upper half steps back from the end, as the CPU
  whole = 0; frac = 0.0;
  let ih = f32(j >> 12u) * 4096.0; let il = f32(j & 4095u);
  add_exact(XF(w)); add_exact(XF(w + 1u));
  add_exact(XF(w + 2u) * il); add_exact(XF(w + 2u) * ih);
  add_exact(XF(w + 3u) * il); add_exact(XF(w + 3u) * ih);
  add_exact(XF(w + 4u) * f32(j));
  let r = round(frac); whole += i32(r); frac -= r;
  if (whole > 128) { return XF(11u); }    // past f32's range: inf
  if (whole < -152) { return XF(12u); }   // below its smallest subnormal: 0
  let h = whole / 2;
  return ldexp(ldexp(exp2(frac), h), whole - h);
"""


def _exact_parts(v: float, parts: int) -> list[float]:
    """`v` as `parts` f32 values: all but the last carry _SPLIT_BITS significant bits (their products
    with a 12-bit integer are exact in f32), the last the rounded remainder."""
    out = []
    for _ in range(parts - 1):
        m, e = math.frexp(v)
        head = math.ldexp(round(m * (1 << _SPLIT_BITS)), e - _SPLIT_BITS) if v else 0.0
        out.append(head)
        v -= head
    return out + [v]


@register("logspace.out")
def logspace_out(start: float, end: float, steps: int, base: float = 10.0, *,
                 out: torch.Tensor) -> torch.Tensor:
    """torch.logspace on the device: base ** x for torch's two-sided linspace x, exponent summed exactly."""
    check_supported(out.dtype, "logspace")
    if steps < 0:
        raise RuntimeError("logspace: number of steps must be non-negative")
    if base <= 0:
        raise NotImplementedError(f"webgpu: logspace with base {base} <= 0 is not supported; use a "
                                  f"positive base (or compute on the CPU)")
    _resize_out(out, steps)
    if steps == 0:
        return out
    if out.dtype.is_floating_point:  # the CPU rounds start and end to the result dtype first
        start, end = (torch.tensor(float(v), dtype=out.dtype).item() for v in (start, end))
    log2b = math.log2(base)
    if steps == 1:
        return fill(out, base ** float(start))
    step = (float(end) - float(start)) / (steps - 1)
    words = [steps]
    for origin, sign in ((float(start), 1.0), (float(end), -1.0)):
        a = origin * log2b
        hi = struct.unpack("<f", struct.pack("<f", a))[0]
        words += [_f32_bits(x) for x in (hi, a - hi, *_exact_parts(sign * step * log2b, 3))]
    words += [_f32_bits(math.inf), _f32_bits(0.0)]
    produce(out, _LOGSPACE_BODY, "f", words, "logspace", helpers=_LOGSPACE_HELPERS)
    return out


@register("eye.out")
def eye_out(n: int, *, out: torch.Tensor) -> torch.Tensor:
    """torch.eye(n) on the device."""
    return eye_m_out(n, n, out=out)


@register("eye.m_out")
def eye_m_out(n: int, m: int, *, out: torch.Tensor) -> torch.Tensor:
    """torch.eye(n, m) on the device: 1 where row == column."""
    check_supported(out.dtype, "eye")
    if n < 0 or m < 0:
        raise RuntimeError(f"eye: n and m must be non-negative, got {n}, {m}")
    if tuple(out.shape) != (n, m):
        out.resize_(n, m)
    produce(out, "  return select(0, 1, li / X(0u) == li % X(0u));", "i", [max(m, 1)], "eye")
    return out
