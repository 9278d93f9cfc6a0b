"""torch.fft on webgpu (Stockham radix-2 for powers of two, a direct DFT for other short lengths, Bluestein
for other long ones) against torch CPU."""

import pytest
import torch

torch.manual_seed(0)


def _close(actual, expected):
    assert actual.device.type == "webgpu"
    torch.testing.assert_close(actual.cpu(), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n", [1, 6, 16, 64])
def test_fft_ifft_rfft_irfft(webgpu, n):
    x = torch.randn(3, n)
    X = x.to(webgpu)
    _close(torch.fft.fft(X), torch.fft.fft(x))
    _close(torch.fft.ifft(X, norm="ortho"), torch.fft.ifft(x, norm="ortho"))
    _close(torch.fft.rfft(X), torch.fft.rfft(x))
    spectrum = torch.fft.rfft(x)
    _close(torch.fft.irfft(spectrum.to(webgpu), n=n), torch.fft.irfft(spectrum, n=n))
    _close(torch.fft.hfft(spectrum.to(webgpu), n=n), torch.fft.hfft(spectrum, n=n))
    _close(torch.fft.ihfft(X), torch.fft.ihfft(x))


def test_complex_input_and_padding(webgpu):
    z = torch.randn(4, 5, dtype=torch.complex64)
    _close(torch.fft.fft(z.to(webgpu), n=8, dim=0), torch.fft.fft(z, n=8, dim=0))
    _close(torch.fft.ifft(z.to(webgpu), n=3), torch.fft.ifft(z, n=3))


def test_nd_transforms(webgpu):
    x = torch.randn(2, 4, 6, 8)
    X = x.to(webgpu)
    _close(torch.fft.fft2(X), torch.fft.fft2(x))
    _close(torch.fft.fftn(X, dim=(0, 2, 3), norm="forward"), torch.fft.fftn(x, dim=(0, 2, 3), norm="forward"))
    _close(torch.fft.rfftn(X), torch.fft.rfftn(x))
    spectrum = torch.fft.rfft2(x)
    _close(torch.fft.irfft2(spectrum.to(webgpu), s=(6, 8)), torch.fft.irfft2(spectrum, s=(6, 8)))


def test_stft(webgpu):
    x = torch.randn(2, 100)
    window = torch.hann_window(16)
    got = torch.stft(x.to(webgpu), 16, hop_length=4, window=window.to(webgpu), return_complex=True)
    _close(got, torch.stft(x, 16, hop_length=4, window=window, return_complex=True))


@pytest.mark.parametrize("n", [100, 1000, 2**14])  # Bluestein (two lengths), a long Stockham network
def test_long_transforms(webgpu, n):
    x = torch.randn(2, n)
    for f in (torch.fft.fft, torch.fft.ifft, torch.fft.rfft):
        got, want = f(x.to(webgpu)).cpu(), f(x)
        assert ((got - want).abs().max() / want.abs().max()).item() < 2e-6
    spectrum = torch.fft.rfft(x)
    torch.testing.assert_close(torch.fft.irfft(spectrum.to(webgpu), n=n).cpu(), x, rtol=1e-5, atol=1e-5)


def test_istft_and_unfold_backward(webgpu):
    x = torch.randn(2, 200)
    window = torch.hann_window(32)
    spec = torch.stft(x, 32, hop_length=8, window=window, return_complex=True)
    got = torch.istft(spec.to(webgpu), 32, hop_length=8, window=window.to(webgpu), length=200)
    _close(got, torch.istft(spec, 32, hop_length=8, window=window, length=200))
    grad = torch.randn(3, 4, 5)  # windows of size 5, step 2 along dim 1 of a [3, 11] input
    _close(torch.ops.aten.unfold_backward(grad.to(webgpu), [3, 11], 1, 5, 2),
           torch.ops.aten.unfold_backward(grad, [3, 11], 1, 5, 2))
