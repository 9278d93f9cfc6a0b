"""LU / Cholesky / triangular solvers on webgpu against torch CPU: both kernel variants (workgroup memory
up to 32 x 32, in place in storage above), batches, broadcasting, singular inputs and their info codes."""

import pytest
import torch

torch.manual_seed(0)


def _close(actual, expected, tol=1e-4):
    torch.testing.assert_close(actual.cpu(), expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("n", [1, 4, 33])  # 33: the global-memory variant
def test_lu_factor_solve_inv_det(webgpu, n):
    A = torch.randn(3, n, n) + n * torch.eye(n) * 0.1
    B = torch.randn(3, n, 2)
    a = A.to(webgpu)
    lu, piv = torch.linalg.lu_factor(a)
    elu, epiv = torch.linalg.lu_factor(A)
    _close(lu, elu)
    assert torch.equal(piv.cpu(), epiv)
    got = torch.linalg.lu_solve(lu, piv, B.to(webgpu), adjoint=True)
    _close(got, torch.linalg.lu_solve(elu, epiv, B, adjoint=True), 1e-3)
    _close(torch.linalg.solve(a, B.to(webgpu)), torch.linalg.solve(A, B), 1e-3)
    _close(torch.linalg.inv(a), torch.linalg.inv(A), 1e-3)
    _close(torch.linalg.det(a), torch.linalg.det(A), 1e-3)
    sign, logabs = torch.linalg.slogdet(a)
    esign, elogabs = torch.linalg.slogdet(A)
    _close(sign, esign)
    _close(logabs, elogabs)


def test_rectangular_lu_and_broadcast_solve(webgpu):
    A = torch.randn(5, 3)
    P, L, U = torch.linalg.lu(A.to(webgpu))
    _close(P @ L @ U, A)
    EP, EL, EU = torch.linalg.lu(A)
    _close(L, EL)
    _close(U, EU)
    M = torch.randn(4, 4) + 4 * torch.eye(4)
    B = torch.randn(2, 3, 4, 1)
    _close(torch.linalg.solve(M.to(webgpu), B.to(webgpu)), torch.linalg.solve(M, B), 1e-3)
    v = torch.randn(4)
    _close(torch.linalg.solve(M.to(webgpu), v.to(webgpu)), torch.linalg.solve(M, v), 1e-3)
    _close(torch.linalg.solve(M.to(webgpu), B[0, 0].mT.to(webgpu), left=False),
           torch.linalg.solve(M, B[0, 0].mT, left=False), 1e-3)


def test_singular_info_and_errors(webgpu):
    A = torch.tensor([[[1.0, 2.0], [2.0, 4.0]], [[2.0, 0.0], [0.0, 3.0]]])
    _, info = torch.linalg.inv_ex(A.to(webgpu))
    assert info.cpu().tolist() == torch.linalg.inv_ex(A)[1].tolist() == [2, 0]
    _, _, info = torch.linalg.lu_factor_ex(A.to(webgpu))
    assert info.dtype == torch.int32 and info.cpu().tolist() == [2, 0]
    with pytest.raises(torch.linalg.LinAlgError, match="singular"):
        torch.linalg.inv(A.to(webgpu))
    with pytest.raises(torch.linalg.LinAlgError, match="singular"):
        torch.linalg.solve(A.to(webgpu), torch.ones(2, 2, 1, device=webgpu))
    assert torch.linalg.det(A.to(webgpu)).cpu()[0].item() == 0.0


def test_cholesky_and_not_positive_definite(webgpu):
    X = torch.randn(2, 40, 40)
    A = X @ X.mT + 40 * torch.eye(40)
    _close(torch.linalg.cholesky(A.to(webgpu)), torch.linalg.cholesky(A), 1e-3)
    _close(torch.linalg.cholesky(A[:, :6, :6].to(webgpu), upper=True), torch.linalg.cholesky(A[:, :6, :6],
                                                                                            upper=True), 1e-3)
    bad = torch.tensor([[[4.0, 2.0], [2.0, -1.0]], [[1.0, 0.0], [0.0, 1.0]]])
    _, info = torch.linalg.cholesky_ex(bad.to(webgpu))
    assert info.cpu().tolist() == torch.linalg.cholesky_ex(bad)[1].tolist() == [2, 0]
    with pytest.raises(torch.linalg.LinAlgError, match="positive-definite"):
        torch.linalg.cholesky(bad.to(webgpu))


@pytest.mark.parametrize(("upper", "left", "unit"), [(True, True, False), (False, False, True)])
def test_solve_triangular(webgpu, upper, left, unit):
    A = torch.randn(2, 5, 5).triu() + 3 * torch.eye(5)
    A = A if upper else A.mT
    B = torch.randn(2, 5, 3) if left else torch.randn(2, 3, 5)
    _close(torch.linalg.solve_triangular(A.to(webgpu), B.to(webgpu), upper=upper, left=left,
                                         unitriangular=unit),
           torch.linalg.solve_triangular(A, B, upper=upper, left=left, unitriangular=unit), 1e-3)


def test_float16_is_refused(webgpu):
    with pytest.raises(TypeError, match="float32"):
        torch.linalg.inv(torch.eye(3, dtype=torch.float16, device=webgpu))


def test_inv_with_the_fallback_on(monkeypatch):
    """issue 11 item 2: inv's info check no longer goes through the CPU fallback's int32 `any`."""
    monkeypatch.delenv("TORCH_WEBGPU_FALLBACK", raising=False)
    A = torch.randn(5, 5).add(5 * torch.eye(5))
    _close(torch.linalg.inv(A.to("webgpu")), torch.linalg.inv(A), 1e-4)
    with pytest.raises(torch.linalg.LinAlgError):
        torch.linalg.inv(torch.zeros(2, 2, device="webgpu"))


@pytest.mark.parametrize("op", ["det", "slogdet", "solve", "inv", "cholesky"])
def test_gradients_match_cpu(webgpu, op):
    """torch's backward formulas read the LU/pivots these kernels return (det's LU is of A^T, as on CPU)."""
    A = torch.randn(2, 4, 4) + 4 * torch.eye(4)
    B = torch.randn(2, 4, 2)
    f = {"det": lambda a, b: torch.linalg.det(a), "slogdet": lambda a, b: torch.linalg.slogdet(a)[1],
         "solve": torch.linalg.solve, "inv": lambda a, b: torch.linalg.inv(a),
         "cholesky": lambda a, b: torch.linalg.cholesky(a @ a.mT)}[op]
    grads = []
    for device in (webgpu, "cpu"):
        a, b = A.to(device).requires_grad_(), B.to(device).requires_grad_()
        f(a, b).sum().backward()
        grads.append(a.grad.cpu())
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("n", [6, 40])
def test_ldl_indefinite_pivots_match_lapack(webgpu, n):
    X = torch.randn(3, n, n, generator=torch.Generator().manual_seed(n))
    A = X + X.mT
    # a zero diagonal makes Bunch-Kaufman take 2x2 pivots whatever the draw (a 6x6 draw may need none)
    A.diagonal(dim1=-2, dim2=-1).zero_()
    LD, piv, info = torch.linalg.ldl_factor_ex(A.to(webgpu))
    eLD, epiv, einfo = torch.linalg.ldl_factor_ex(A)
    assert torch.equal(piv.cpu(), epiv) and torch.equal(info.cpu(), einfo)
    assert (epiv < 0).any()
    _close(LD, eLD, 1e-3)
    B = torch.randn(3, n, 2)
    X = torch.linalg.ldl_solve(LD, piv, B.to(webgpu)).cpu()
    torch.testing.assert_close(A @ X, B, rtol=1e-2, atol=1e-2)
