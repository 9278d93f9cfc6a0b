"""complex64 storage on webgpu: (real, imag) float32 pairs; copies, views and conjugate bits."""

import pytest
import torch


def test_round_trip_views_and_conj(webgpu):
    z = torch.randn(3, 4, dtype=torch.complex64)
    w = z.to(webgpu)
    assert w.dtype == torch.complex64
    torch.testing.assert_close(w.cpu(), z)
    torch.testing.assert_close(w.t().contiguous().cpu(), z.t())
    torch.testing.assert_close(torch.view_as_real(w).cpu(), torch.view_as_real(z))
    torch.testing.assert_close(w.real.cpu(), z.real)
    torch.testing.assert_close(w.imag.cpu(), z.imag)
    torch.testing.assert_close(w.conj().cpu(), z.conj())
    torch.testing.assert_close(w.conj().resolve_conj().cpu(), z.conj().resolve_conj())
    assert w[1, 2].item() == z[1, 2].item()


def test_casts_and_fill(webgpu):
    x = torch.randn(5)
    torch.testing.assert_close(x.to(webgpu).to(torch.complex64).cpu(), x.to(torch.complex64))
    filled = torch.full((2, 3), 1.5 - 2j, dtype=torch.complex64, device=webgpu)
    torch.testing.assert_close(filled.cpu(), torch.full((2, 3), 1.5 - 2j, dtype=torch.complex64))
    assert torch.zeros(4, dtype=torch.complex64, device=webgpu).cpu().abs().sum().item() == 0


def test_negative_bit_views(webgpu):
    z = torch.randn(3, 4, dtype=torch.complex64)
    imag = z.to(webgpu).conj().imag  # a view with the negative bit
    assert imag.is_neg()
    torch.testing.assert_close(imag.cpu(), z.conj().imag.resolve_neg())
    torch.testing.assert_close((imag + 1).cpu(), z.conj().imag + 1)
    torch.testing.assert_close(torch.conj_physical(z.to(webgpu)).cpu(), torch.conj_physical(z))


def test_arithmetic(webgpu):
    z, u = torch.randn(3, 4, dtype=torch.complex64), torch.randn(3, 4, dtype=torch.complex64)
    r = torch.randn(4)
    Z, U, R = z.to(webgpu), u.to(webgpu), r.to(webgpu)
    for got, want in [(Z * U, z * u), (Z + U, z + u), (Z - U, z - u), (Z / U, z / u), (-Z, -z),
                      (Z.abs(), z.abs()), (R * Z, r * z), (Z + (1 - 2j), z + (1 - 2j)),
                      (torch.add(Z, U, alpha=2), torch.add(z, u, alpha=2)), (Z.conj() * U, z.conj() * u),
                      (R / Z, r / z)]:
        assert got.dtype == want.dtype
        torch.testing.assert_close(got.cpu(), want)
    Z.mul_(U)
    torch.testing.assert_close(Z.cpu(), z * u)


def test_unsupported_complex_op_is_a_clear_error(webgpu):
    with pytest.raises(TypeError, match="'exp' does not support complex64"):
        torch.exp(torch.ones(2, dtype=torch.complex64, device=webgpu))
