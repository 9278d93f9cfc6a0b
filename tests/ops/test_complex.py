"""complex64 storage on webgpu: (real, imag) float32 pairs; copies, views and conjugate bits."""

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
