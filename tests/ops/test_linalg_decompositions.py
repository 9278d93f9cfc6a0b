"""QR, Householder products, eigh (Jacobi), svd (one-sided Jacobi), pinv, lstsq and matrix_exp on webgpu.
Eigen/singular vectors are checked through invariants (their signs are not unique)."""

import pytest
import torch

torch.manual_seed(0)


def _close(actual, expected, tol=1e-4):
    torch.testing.assert_close(actual.cpu(), expected, rtol=tol, atol=tol)


@pytest.mark.parametrize(("m", "n"), [(6, 4), (3, 5), (40, 34)])
def test_qr_modes(webgpu, m, n):
    A = torch.randn(2, m, n)
    for mode in ("reduced", "complete"):
        Q, R = torch.linalg.qr(A.to(webgpu), mode=mode)
        EQ, ER = torch.linalg.qr(A, mode=mode)
        _close(Q, EQ, 1e-3)
        _close(R, ER, 1e-3)
    _close(torch.linalg.qr(A.to(webgpu), mode="r")[1], torch.linalg.qr(A, mode="r")[1], 1e-3)


@pytest.mark.parametrize("n", [5, 36])
def test_eigh_invariants(webgpu, n):
    X = torch.randn(2, n, n)
    A = X + X.mT
    w, V = torch.linalg.eigh(A.to(webgpu))
    _close(w, torch.linalg.eigvalsh(A), 1e-3)
    V = V.cpu()
    _close(V.mT @ V, torch.eye(n).expand(2, n, n), 1e-4)
    _close(A @ V, V * w.cpu().unsqueeze(-2), 1e-3)
    _close(torch.linalg.eigvalsh(X.to(webgpu), UPLO="U"), torch.linalg.eigvalsh(X, UPLO="U"), 1e-3)


@pytest.mark.parametrize(("m", "n"), [(7, 4), (4, 7), (40, 33)])
def test_svd_invariants(webgpu, m, n):
    A = torch.randn(2, m, n)
    U, S, Vh = torch.linalg.svd(A.to(webgpu), full_matrices=True)
    _close(S, torch.linalg.svdvals(A), 1e-3)
    U, S, Vh = U.cpu(), S.cpu(), Vh.cpu()
    k = min(m, n)
    _close(U.mT @ U, torch.eye(m).expand(2, m, m), 1e-4)
    _close(Vh @ Vh.mT, torch.eye(n).expand(2, n, n), 1e-4)
    _close((U[..., :k] * S.unsqueeze(-2)) @ Vh[..., :k, :], A, 1e-3)


def test_pinv_lstsq(webgpu):
    A = torch.randn(6, 4)
    A[:, 3] = A[:, 0]  # rank 3
    _close(torch.linalg.pinv(A.to(webgpu)), torch.linalg.pinv(A), 1e-3)
    B = torch.randn(6, 2)
    # the minimum-norm solution gelsy and gelsd define, from torch CPU's SVD in float64: torch CPU's own
    # gelsy/gelsd on this rank-deficient matrix return rank 2 and another solution now and then for the
    # same input (11 of 2000 calls, one thread or many)
    want = torch.linalg.pinv(A.double()) @ B.double()
    for driver in ("gelsy", "gelsd"):
        got = torch.linalg.lstsq(A.to(webgpu), B.to(webgpu), driver=driver)
        _close(got.solution, want.float(), 1e-3)
        assert int(got.rank.cpu()) == 3


def test_householder_product(webgpu):
    A = torch.randn(3, 6, 4)
    tau = torch.rand(3, 3)
    _close(torch.linalg.householder_product(A.to(webgpu), tau.to(webgpu)),
           torch.linalg.householder_product(A, tau), 1e-4)


@pytest.mark.parametrize("scale", [0.1, 8.0])
def test_matrix_exp(webgpu, scale):
    A = torch.randn(3, 5, 5) * scale / 5
    got, want = torch.linalg.matrix_exp(A.to(webgpu)).cpu(), torch.linalg.matrix_exp(A.double())
    # float32 accuracy relative to the result's size (small entries of a large exponential cancel)
    err = (got.double() - want).abs().amax((-2, -1)) / want.abs().amax((-2, -1))
    assert err.max().item() < 2e-5


def test_size_limit_is_a_clear_error(webgpu):
    with pytest.raises(NotImplementedError, match="up to 256"):
        torch.linalg.eigvalsh(torch.zeros(300, 300, device=webgpu))
