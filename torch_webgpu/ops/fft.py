"""Aten kernels of torch.fft on the device: _fft_c2c, _fft_r2c, _fft_c2r (and their out= forms), which
every torch.fft function and stft reach after torch's own padding, trimming and dim handling.

Data are complex64 tensors seen as float32 (real, imag) pairs. An n-D transform is a 1-D transform per
dim (codegen/fft.py): the dim is moved last, made contiguous, transformed row by row and moved back.
Lengths that are not powers of two run a direct DFT up to DIRECT_MAX, Bluestein's chirp convolution
through power-of-two transforms above (O(n log n), chirps from float64 host tables).
r2c transforms the real input with zero imaginary parts and keeps the first n // 2 + 1 outputs along
the last dim (onesided); c2r rebuilds the Hermitian spectrum (X[n - k] = conj X[k]) and keeps the real
part of its inverse, so imaginary parts of the self-conjugate bins are ignored, as by pocketfft.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from .codegen import fft as fft_kernels
from .codegen.elementwise import grid
from .codegen.operand import pack_u32
from .out_args import write_out
from .registry import register
from .tensor_buffers import new_empty, runtime, windowed_binding

DIRECT_MAX = 64  # lengths up to this (not powers of two) run the direct DFT; longer ones Bluestein
_TWIDDLES: dict[int, torch.Tensor] = {}


def _twiddles(n: int) -> torch.Tensor:
    """[n, 2] float32 table of exp(-2 pi i t / n), computed in float64 once per n and kept on the device."""
    table = _TWIDDLES.get(n)
    if table is None:
        angle = -2.0 * np.pi * np.arange(n, dtype=np.float64) / n
        host = torch.from_numpy(np.stack([np.cos(angle), np.sin(angle)], -1).astype(np.float32))
        table = _TWIDDLES[n] = host.to("webgpu")
    return table


def _launch(family: str, words: list[int], x: torch.Tensor, y: torch.Tensor, w: torch.Tensor, work: int):
    """One FFT dispatch; offsets (in complex elements) of x, y, w are appended to `words`."""
    bindings, offsets = [], []
    for t in (x, y, w):
        b, off = windowed_binding(t)
        bindings.append(b)
        offsets.append(off // 2)
    rt = runtime()
    params = rt.constant(pack_u32([*words, *offsets]))
    rt.dispatch(fft_kernels.kernel(family), [params, *bindings], grid(work, fft_kernels.WG),
                label=f"fft_{family}")


def _transform_rows(pairs: torch.Tensor, inverse: bool) -> torch.Tensor:
    """The unnormalized DFT (inverse: conjugate twiddles) along dim -2 of contiguous float [rows, n, 2]."""
    rows, n, _ = pairs.shape
    if rows == 0 or n <= 1:
        return pairs.clone()
    if n & (n - 1) and n > DIRECT_MAX:
        return _bluestein(pairs, inverse)
    w = _twiddles(n)
    if n & (n - 1) == 0:  # Stockham radix-2: log2 n passes, ping-pong between two buffers
        buffers = [new_empty(pairs.shape, torch.float32, pairs) for _ in range(2)]
        src, ns, turn = pairs, 1, 0
        while ns < n:
            _launch("stage", [rows * n // 2, n, ns, int(inverse)], src, buffers[turn], w, rows * n // 2)
            src, ns, turn = buffers[turn], ns * 2, turn ^ 1
        return src
    out = new_empty(pairs.shape, torch.float32, pairs)
    _launch("dft", [rows * n, n, 0, int(inverse)], pairs, out, w, rows * n)
    return out


def _cmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Elementwise complex product of float pairs [..., 2] (broadcasting)."""
    ar, ai, br, bi = a[..., 0], a[..., 1], b[..., 0], b[..., 1]
    return torch.stack([ar * br - ai * bi, ar * bi + ai * br], dim=-1)


_CHIRPS: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}


def _chirp(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(c [n, 2] with c_k = exp(-pi i k^2 / n), FFT_M of the wrapped conj(c) [M, 2]) for Bluestein."""
    cached = _CHIRPS.get(n)
    if cached is None:
        m = 1 << (2 * n - 2).bit_length()  # a power of two >= 2n - 1
        k = np.arange(n, dtype=np.int64)
        angle = -np.pi * ((k * k) % (2 * n)) / n  # k^2 mod 2n keeps the float64 angle exact
        c = np.stack([np.cos(angle), np.sin(angle)], -1)
        b = np.zeros((m, 2))
        b[:n] = c * [1.0, -1.0]
        b[m - n + 1:] = b[1:n][::-1]
        chirp = torch.from_numpy(c.astype(np.float32)).to("webgpu")
        kernel = _transform_rows(torch.from_numpy(b.astype(np.float32)).to("webgpu").reshape(1, m, 2), False)
        cached = _CHIRPS[n] = (chirp, kernel.reshape(m, 2))
    return cached


def _bluestein(pairs: torch.Tensor, inverse: bool) -> torch.Tensor:
    """A length-n DFT as a circular convolution of power-of-two length M >= 2n - 1 (Bluestein):
    X_k = c_k sum_j (x_j c_j) conj(c_{k-j}), c_k = exp(-pi i k^2 / n); the inverse conjugates around it."""
    rows, n, _ = pairs.shape
    sign = torch.tensor([1.0, -1.0], device=pairs.device)
    x = pairs * sign if inverse else pairs  # inverse DFT(x) = conj(DFT(conj(x)))
    chirp, kernel = _chirp(n)
    m = kernel.shape[0]
    a = torch.zeros(rows, m, 2, device=pairs.device)
    a[:, :n] = _cmul(x, chirp)
    spectrum = _cmul(_transform_rows(a, False), kernel)
    conv = _transform_rows(spectrum.contiguous(), True)[:, :n] * (1.0 / m)
    out = _cmul(conv, chirp)
    return (out * sign if inverse else out).contiguous()


def _along(pairs: torch.Tensor, dim: int, inverse: bool) -> torch.Tensor:
    """Transform float pairs [..., 2] (complex dims first) along complex dim `dim`."""
    moved = pairs.movedim(dim, -2)
    shape = moved.shape
    rows = math.prod(shape[:-2])
    flat = moved.reshape(rows, shape[-2], 2).contiguous()
    return _transform_rows(flat, inverse).reshape(shape).movedim(-2, dim)


def _scale(normalization: int, sizes: Sequence[int]) -> float:
    """fft_norm_mode: 0 none, 1 by 1/sqrt(n), 2 by 1/n, n the product of the signal sizes."""
    n = math.prod(sizes)
    return {0: 1.0, 1: 1.0 / math.sqrt(n) if n else 1.0, 2: 1.0 / n if n else 1.0}[normalization]


def _check(op: str, x: torch.Tensor) -> None:
    if x.dtype not in (torch.float32, torch.complex64):
        raise TypeError(f"webgpu: '{op}' supports float32 and complex64 inputs, got {x.dtype}")


def _pairs_of(x: torch.Tensor) -> torch.Tensor:
    """Contiguous float32 (real, imag) pairs of a real or complex tensor."""
    if x.is_complex():
        return torch.view_as_real(x.resolve_conj()).contiguous()
    pairs = new_empty((*x.shape, 2), torch.float32, x)
    pairs[..., 0].copy_(x)
    pairs[..., 1].zero_()
    return pairs


def _complex_of(pairs: torch.Tensor, scale: float) -> torch.Tensor:
    if scale != 1.0:
        pairs = pairs * scale
    return torch.view_as_complex(pairs.contiguous())


def _c2c(x: torch.Tensor, dim: Sequence[int], normalization: int, forward: bool) -> torch.Tensor:
    _check("_fft_c2c", x)
    dims = [d % x.dim() for d in dim]
    pairs = _pairs_of(x)
    for d in dims:
        pairs = _along(pairs, d, not forward)
    return _complex_of(pairs, _scale(normalization, [x.shape[d] for d in dims]))


def _r2c(x: torch.Tensor, dim: Sequence[int], normalization: int, onesided: bool) -> torch.Tensor:
    _check("_fft_r2c", x)
    dims = [d % x.dim() for d in dim]
    pairs = _pairs_of(x)
    for d in dims:
        pairs = _along(pairs, d, False)
    if onesided:
        last = dims[-1]
        pairs = pairs.narrow(last, 0, x.shape[last] // 2 + 1)
    return _complex_of(pairs, _scale(normalization, [x.shape[d] for d in dims]))


def _c2r(x: torch.Tensor, dim: Sequence[int], normalization: int, last_dim_size: int) -> torch.Tensor:
    _check("_fft_c2r", x)
    dims = [d % x.dim() for d in dim]
    pairs = _pairs_of(x)
    for d in dims[:-1]:
        pairs = _along(pairs, d, True)
    last, n = dims[-1], last_dim_size
    head = pairs.narrow(last, 0, min(n // 2 + 1, pairs.shape[last]))
    tail = pairs.narrow(last, 1, (n - 1) // 2).flip(last)
    tail = tail * torch.tensor([1.0, -1.0], device=x.device)  # conjugates of X[1 .. (n-1)//2], reversed
    full = torch.cat([head, tail], dim=last)
    pairs = _along(full, last, True)
    sizes = [x.shape[d] for d in dims[:-1]] + [n]
    real = pairs[..., 0]
    scale = _scale(normalization, sizes)
    return (real * scale).contiguous() if scale != 1.0 else real.contiguous()


@register("_fft_c2c", planned=False)
def fft_c2c(self, dim, normalization, forward):
    """Complex-to-complex FFT over `dim` (Stockham radix-2 or direct DFT per dim)."""
    return _c2c(self, dim, normalization, forward)


@register("_fft_c2c.out", planned=False)
def fft_c2c_out(self, dim, normalization, forward, *, out):
    """_fft_c2c(out=)."""
    return write_out(out, _c2c(self, dim, normalization, forward))


@register("_fft_r2c", planned=False)
def fft_r2c(self, dim, normalization, onesided):
    """Real-to-complex FFT over `dim` (onesided: the last dim keeps n // 2 + 1 outputs)."""
    return _r2c(self, dim, normalization, onesided)


@register("_fft_r2c.out", planned=False)
def fft_r2c_out(self, dim, normalization, onesided, *, out):
    """_fft_r2c(out=)."""
    return write_out(out, _r2c(self, dim, normalization, onesided))


@register("_fft_c2r", planned=False)
def fft_c2r(self, dim, normalization, last_dim_size):
    """Complex-to-real inverse FFT over `dim` of a onesided Hermitian spectrum."""
    return _c2r(self, dim, normalization, last_dim_size)


@register("_fft_c2r.out", planned=False)
def fft_c2r_out(self, dim, normalization, last_dim_size, *, out):
    """_fft_c2r(out=)."""
    return write_out(out, _c2r(self, dim, normalization, last_dim_size))
