"""torch.linalg.eigvals on the device (ops/linalg_eigvals.py): Hessenberg reduction + Francis double-shift
QR per matrix. The eigenvalue order follows the Schur form's diagonal and need not be LAPACK's, so results
are matched to the CPU's float64 eigenvalues as a set."""

import pytest
import torch


def _set_distance(got: torch.Tensor, want: torch.Tensor) -> float:
    """Largest distance from an eigenvalue of either set to the nearest one of the other."""
    d = (got.to(torch.complex128)[..., :, None] - want.to(torch.complex128)[..., None, :]).abs()
    return max(d.min(-1).values.max().item(), d.min(-2).values.max().item())


@pytest.mark.parametrize("n", [1, 2, 3, 8, 24])
def test_eigvals_match_the_cpu_as_a_set(webgpu, n):
    a = torch.randn(3, n, n, generator=torch.Generator().manual_seed(n))
    got = torch.linalg.eigvals(a.to(webgpu))
    assert got.device.type == "webgpu" and got.dtype == torch.complex64 and got.shape == (3, n)
    assert _set_distance(got.cpu(), torch.linalg.eigvals(a.double())) < 1e-5 * n


def test_eigvals_special_matrices(webgpu):
    rotation = torch.tensor([[0.0, -1.0], [1.0, 0.0]])
    torch.testing.assert_close(torch.linalg.eigvals(rotation.to(webgpu)).cpu(),
                               torch.linalg.eigvals(rotation))
    torch.testing.assert_close(torch.linalg.eigvals(torch.eye(4, device=webgpu)).cpu(),
                               torch.ones(4, dtype=torch.complex64))
    torch.testing.assert_close(torch.linalg.eigvals(torch.zeros(3, 3, device=webgpu)).cpu(),
                               torch.zeros(3, dtype=torch.complex64))
    assert torch.linalg.eigvals(torch.zeros(2, 0, 0, device=webgpu)).shape == (2, 0)
    s = torch.randn(6, 6, generator=torch.Generator().manual_seed(0))
    s = s + s.T   # symmetric: real eigenvalues
    got = torch.linalg.eigvals(s.to(webgpu)).cpu()
    torch.testing.assert_close(got.real.sort().values, torch.linalg.eigvalsh(s), atol=1e-5, rtol=1e-5)
    assert got.imag.abs().max() == 0


def test_eigvals_rejects_what_it_cannot_do(webgpu):
    with pytest.raises(RuntimeError, match="square"):
        torch.linalg.eigvals(torch.ones(2, 3, device=webgpu))
    with pytest.raises(NotImplementedError, match="up to 128"):
        torch.linalg.eigvals(torch.ones(130, 130, device=webgpu))


@pytest.mark.parametrize("n", [1, 2, 5, 16])
def test_eig_vectors_satisfy_a_v_equals_v_w(webgpu, n):
    a = torch.randn(2, n, n, generator=torch.Generator().manual_seed(10 + n))
    w, v = torch.linalg.eig(a.to(webgpu))
    assert v.device.type == "webgpu" and v.dtype == torch.complex64 and v.shape == (2, n, n)
    w, v = w.cpu(), v.cpu()
    assert _set_distance(w, torch.linalg.eigvals(a.double())) < 1e-5 * n
    residual = a.to(torch.complex64) @ v - v * w[..., None, :]
    assert residual.abs().max().item() < 1e-5 * n
    # LAPACK geev's scaling: unit 2-norm, the largest component real and positive
    torch.testing.assert_close(v.abs().pow(2).sum(-2), torch.ones(2, n), atol=1e-5, rtol=0)
    largest = v.gather(-2, v.abs().argmax(-2, keepdim=True))
    assert largest.imag.abs().max() == 0 and largest.real.min() > 0
