"""Aten kernels for orthogonal decompositions of batched float32 matrices and what is built on them:
geqrf, householder_product, qr, eigh/eigvalsh (cyclic Jacobi), svd/svdvals (one-sided Jacobi), pinv,
lstsq, matrix_exp (scaling and squaring with a degree-13 Pade approximant on the device's matmul).

Eigenvectors and singular vectors are unique only up to sign (and rotation inside repeated values): they
satisfy A V = V diag(w) / A = U S V^T to float32 accuracy but need not equal LAPACK's column signs.
"""

from __future__ import annotations

import torch

from .codegen import linalg_kernels
from .linalg_batch import (
    check_matrix,
    check_size,
    flat,
    launch,
    lu_factor,
    lu_solve,
    offset,
    per_invocation,
    per_matrix,
    work_copy,
)
from .out_args import write_out
from .registry import register
from .tensor_buffers import new_empty

# ---- Householder QR ------------------------------------------------------------------------------------


def geqrf3(A: torch.Tensor):
    """(reflectors and R [b, m, n], tau [b, k]) of A's matrices (LAPACK geqrf layout)."""
    check_size("geqrf", "torch.linalg.qr", A.shape[-2], A.shape[-1])
    W = work_copy(A)
    b, m, n = W.shape
    tau = new_empty((b, min(m, n)), torch.float32, A)
    if b and m and n:
        launch("geqrf", [b, m, n, offset(W), offset(tau)], [W, tau], per_matrix(b),
               linalg_kernels.fits_local(m, n))
    return W, tau


def householder3(V: torch.Tensor, tau: torch.Tensor, cols: int) -> torch.Tensor:
    """Q [b, m, cols]: the first `cols` columns of H_0 ... H_{k-1} (V [b, m, nv] contiguous, tau [b, k])."""
    b, m, nv = V.shape
    k = tau.shape[-1]
    if not k:  # no reflectors: the identity's columns
        return torch.eye(m, cols, dtype=torch.float32, device=V.device).expand(b, m, cols).contiguous()
    Q = new_empty((b, m, cols), torch.float32, V)
    if b and m and cols:
        launch("orgqr", [b * cols, m, nv, k, cols, offset(V), offset(tau), offset(Q)], [V, tau, Q],
               per_invocation(b * cols))
    return Q


@register("geqrf", planned=False)
def geqrf(self):
    """torch.geqrf: Householder QR, one workgroup per matrix."""
    check_matrix("torch.geqrf", self, square=False, name="input")
    W, tau = geqrf3(self)
    return W.reshape(self.shape), tau.reshape(*self.shape[:-2], tau.shape[-1])


def _householder_product(A: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
    check_matrix("torch.linalg.householder_product", A, square=False, name="input")
    m, n = A.shape[-2:]
    if n > m:
        raise RuntimeError("torch.linalg.householder_product: input.shape[-2] must be greater than or equal "
                           "to input.shape[-1]")
    if tau.shape[-1] > n:
        raise RuntimeError("torch.linalg.householder_product: input.shape[-1] must be greater than or equal "
                           "to tau.shape[-1]")
    V = flat(A).contiguous()
    Q = householder3(V, flat(tau.contiguous(), 1).contiguous(), n)
    return Q.reshape(A.shape)


@register("linalg_householder_product", planned=False)
def householder_product(input, tau):  # noqa: A002 (aten's argument name)
    """torch.linalg.householder_product: one invocation per column of Q."""
    return _householder_product(input, tau)


@register("linalg_householder_product.out", planned=False)
def householder_product_out(input, tau, *, out):  # noqa: A002
    """torch.linalg.householder_product(out=)."""
    return write_out(out, _householder_product(input, tau))


@register("ormqr", planned=False)
def ormqr(self, input2, input3, left=True, transpose=False):
    """torch.ormqr: op(Q) C or C op(Q) with Q (m x m) built from geqrf's reflectors (self) and tau."""
    check_matrix("torch.ormqr", self, square=False, name="input")
    m = self.shape[-2]
    if (input3.shape[-2] if left else input3.shape[-1]) != m:
        raise RuntimeError(f"torch.ormqr: other.shape[{-2 if left else -1}] must be equal to input.shape[-2]")
    batch = torch.broadcast_shapes(self.shape[:-2], input2.shape[:-1], input3.shape[:-2])
    V = flat(self.expand(*batch, *self.shape[-2:])).contiguous()
    tau = flat(input2.expand(*batch, input2.shape[-1]), 1).contiguous()
    Q = householder3(V, tau, m).reshape(*batch, m, m)
    Q = Q.mT if transpose else Q
    return Q @ input3 if left else input3 @ Q


def _qr(A: torch.Tensor, mode: str):
    check_matrix("torch.linalg.qr", A, square=False)
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), "
                           "'r', or 'complete'")
    m, n = A.shape[-2:]
    k = min(m, n)
    batch = A.shape[:-2]
    W, tau = geqrf3(A)
    rows = m if mode == "complete" else k
    R = W[:, :rows, :].triu().reshape(*batch, rows, n)
    if mode == "r":
        return A.new_empty(0), R
    cols = m if mode == "complete" else k
    return householder3(W, tau, cols).reshape(*batch, m, cols), R


@register("linalg_qr.out", planned=False)
def qr_out(A, mode="reduced", *, Q, R):
    """torch.linalg.qr(out=): Householder QR (reduced, complete or r)."""
    q, r = _qr(A, mode)
    return write_out(Q, q), write_out(R, r)


# ---- symmetric eigenproblem ----------------------------------------------------------------------------

def eigh3(A: torch.Tensor):
    """(eigenvalues ascending [b, n], eigenvectors [b, n, n]) of symmetric [b, n, n] A (both triangles)."""
    check_size("eigh", "torch.linalg.eigh", A.shape[-2], A.shape[-1])
    W = A.clone(memory_format=torch.contiguous_format)
    b, n, _ = W.shape
    V = new_empty((b, n, n), torch.float32, A)
    if b and n:
        launch("eigh", [b, n, offset(W), offset(V)], [W, V], per_matrix(b), linalg_kernels.fits_local(n, n))
    w = W.diagonal(dim1=-2, dim2=-1)
    w, order = torch.sort(w, dim=-1)
    return w, V.gather(-1, order.unsqueeze(-2).expand(b, n, n))


def _eigh(A: torch.Tensor, uplo: str):
    check_matrix("torch.linalg.eigh", A)
    if uplo not in ("L", "U", "l", "u"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {uplo}")
    tri = flat(A).tril() if uplo in ("L", "l") else flat(A).triu()
    sym = tri + tri.mT - torch.diag_embed(tri.diagonal(dim1=-2, dim2=-1))
    w, V = eigh3(sym)
    return w.reshape(*A.shape[:-1]), V.reshape(A.shape)


@register("_linalg_eigh.eigenvalues", planned=False)
def eigh_out(A, UPLO="L", compute_v=True, *, eigenvalues, eigenvectors):
    """torch.linalg.eigh / eigvalsh (out=): cyclic Jacobi, one workgroup per matrix."""
    w, V = _eigh(A, UPLO)
    return write_out(eigenvalues, w), write_out(eigenvectors, V if compute_v else A.new_empty(0))


# ---- singular value decomposition ----------------------------------------------------------------------

def _complete_basis(U: torch.Tensor) -> torch.Tensor:
    """[b, m, m] orthogonal whose first n columns are U's orthonormal columns ([b, m, n], m > n)."""
    W, tau = geqrf3(U)
    Q = householder3(W, tau, U.shape[-2])
    d = W.diagonal(dim1=-2, dim2=-1)
    signs = torch.where(d < 0, -1.0, 1.0)
    n = U.shape[-1]
    return torch.cat([Q[..., :n] * signs.unsqueeze(-2), Q[..., n:]], dim=-1)


def svd3(A: torch.Tensor, full: bool, compute_uv: bool):
    """(U, S descending, Vh) of [b, m, n] A by one-sided Jacobi on the taller orientation."""
    b, m, n = A.shape
    if m < n:
        U, S, Vh = svd3(A.mT, full, compute_uv)
        return (Vh.mT, S, U.mT) if compute_uv else (U, S, Vh)
    check_size("svd", "torch.linalg.svd", m, n)
    W = A.clone(memory_format=torch.contiguous_format)
    V = new_empty((b, n, n), torch.float32, A)
    if b and n:
        launch("svd", [b, m, n, offset(W), offset(V)], [W, V], per_matrix(b), linalg_kernels.fits_local(m, n))
    S = W.square().sum(-2).sqrt()
    S, order = torch.sort(S, dim=-1, descending=True)
    if not compute_uv:
        return A.new_empty(0), S, A.new_empty(0)
    W = W.gather(-1, order.unsqueeze(-2).expand(b, m, n))
    V = V.gather(-1, order.unsqueeze(-2).expand(b, n, n))
    U = W / torch.where(S > 0, S, 1.0).unsqueeze(-2)
    if full and m > n:
        U = _complete_basis(U.contiguous())
    return U, S, V.mT


@register("_linalg_svd.U", planned=False)
def svd_out(A, full_matrices=False, compute_uv=True, *, driver=None, U, S, Vh):
    """torch.linalg.svd / svdvals (out=): one-sided Jacobi, one workgroup per matrix."""
    check_matrix("torch.linalg.svd", A, square=False)
    if driver is not None:
        raise RuntimeError("torch.linalg.svd: keyword argument `driver=` is only supported on CUDA inputs "
                           "with cuSOLVER backend.")
    m, n = A.shape[-2:]
    batch = A.shape[:-2]
    u, s, vh = svd3(flat(A), full_matrices, compute_uv)
    k = min(m, n)
    s = s.reshape(*batch, k)
    if not compute_uv:
        return write_out(U, u), write_out(S, s), write_out(Vh, vh)
    u = u.reshape(*batch, m, u.shape[-1])
    vh = vh.reshape(*batch, vh.shape[-2], n)
    return write_out(U, u), write_out(S, s), write_out(Vh, vh)


# ---- pinv / lstsq --------------------------------------------------------------------------------------

def _tolerance(S_max: torch.Tensor, atol, rtol, m: int, n: int) -> torch.Tensor:
    """max(atol, rtol * sigma_max) with torch's defaults (rtol = eps * max(m, n) when atol is not given)."""
    def value(t):
        return t.to(device=S_max.device, dtype=torch.float32) if isinstance(t, torch.Tensor) else t

    atol, rtol = value(atol), value(rtol)
    if rtol is None:
        rtol = 0.0 if atol is not None else torch.finfo(torch.float32).eps * max(m, n)
    tol = rtol * S_max
    if atol is not None:
        tol = torch.maximum(tol, atol * torch.ones_like(S_max))
    return tol


def _pinv(A: torch.Tensor, atol, rtol, hermitian: bool) -> torch.Tensor:
    check_matrix("torch.linalg.pinv", A, square=hermitian)
    m, n = A.shape[-2:]
    if A.numel() == 0:
        return A.new_zeros(*A.shape[:-2], n, m)
    if hermitian:
        w, V = _eigh(A, "L")
        tol = _tolerance(w.abs().amax(-1, keepdim=True), atol, rtol, m, n)
        inv = torch.where(w.abs() > tol, 1.0 / torch.where(w == 0, 1.0, w), 0.0)
        return (V * inv.unsqueeze(-2)) @ V.mT
    U, S, Vh = svd3(flat(A), False, True)
    batch = A.shape[:-2]
    U, S, Vh = U.reshape(*batch, *U.shape[-2:]), S.reshape(*batch, -1), Vh.reshape(*batch, *Vh.shape[-2:])
    tol = _tolerance(S[..., :1], atol, rtol, m, n)
    inv = torch.where(S > tol, 1.0 / torch.where(S == 0, 1.0, S), 0.0)
    return (Vh.mT * inv.unsqueeze(-2)) @ U.mT


@register("linalg_pinv.atol_rtol_tensor", planned=False)
def pinv(self, *, atol=None, rtol=None, hermitian=False):
    """torch.linalg.pinv: V diag(1/sigma) U^T from the Jacobi SVD (eigh when hermitian)."""
    return _pinv(self, atol, rtol, hermitian)


@register("linalg_pinv.atol_rtol_float", planned=False)
def pinv_float(self, *, atol=None, rtol=None, hermitian=False):
    """torch.linalg.pinv with float tolerances."""
    return _pinv(self, atol, rtol, hermitian)


@register("linalg_pinv", planned=False)
def pinv_rcond(self, rcond, hermitian=False):
    """torch.linalg.pinv(A, rcond) (deprecated rcond form)."""
    return _pinv(self, None, rcond, hermitian)


def _matrix_rank(A: torch.Tensor, atol, rtol, hermitian: bool) -> torch.Tensor:
    check_matrix("torch.linalg.matrix_rank", A, square=hermitian)
    m, n = A.shape[-2:]
    batch = A.shape[:-2]
    if A.numel() == 0:
        return torch.zeros(batch, dtype=torch.int64, device=A.device)
    if hermitian:
        S = _eigh(A, "L")[0].abs()
    else:
        S = svd3(flat(A), False, False)[1].reshape(*batch, -1)
    tol = _tolerance(S.amax(-1, keepdim=True), atol, rtol, m, n)
    return (S > tol).to(torch.int32).sum(-1).to(torch.int64)


@register("linalg_matrix_rank.atol_rtol_tensor", planned=False)
def matrix_rank(input, *, atol=None, rtol=None, hermitian=False):  # noqa: A002 (aten's argument name)
    """torch.linalg.matrix_rank: singular values (eigenvalues when hermitian) above the tolerance."""
    return _matrix_rank(input, atol, rtol, hermitian)


@register("linalg_matrix_rank.atol_rtol_float", planned=False)
def matrix_rank_float(self, *, atol=None, rtol=None, hermitian=False):
    """torch.linalg.matrix_rank with float tolerances."""
    return _matrix_rank(self, atol, rtol, hermitian)


_LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


@register("linalg_lstsq.out", planned=False)
def lstsq_out(self, b, rcond=None, *, driver=None, solution, residuals, rank, singular_values):
    """torch.linalg.lstsq(out=): the minimum-norm solution through the pseudo-inverse (Jacobi SVD), with
    the side outputs of the chosen LAPACK driver (default gelsy, as on the CPU)."""
    check_matrix("torch.linalg.lstsq", self, square=False, name="input")
    driver = driver or "gelsy"
    if driver not in _LSTSQ_DRIVERS:
        raise RuntimeError(f"torch.linalg.lstsq: parameter `driver` should be one of {_LSTSQ_DRIVERS}")
    vector = b.dim() == self.dim() - 1
    rhs = b.unsqueeze(-1) if vector else b
    if rhs.shape[-2] != self.shape[-2]:
        raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    m, n = self.shape[-2:]
    rtol = torch.finfo(torch.float32).eps * max(m, n) if rcond is None or rcond < 0 else rcond
    batch = torch.broadcast_shapes(self.shape[:-2], rhs.shape[:-2])
    A = self.expand(*batch, m, n)
    rhs = rhs.expand(*batch, *rhs.shape[-2:])
    U, S, Vh = svd3(flat(A), False, True)
    S = S.reshape(*batch, -1)
    keep = S > rtol * S[..., :1] if driver != "gels" else torch.ones_like(S, dtype=torch.bool)
    inv = torch.where(keep, 1.0 / torch.where(S == 0, 1.0, S), 0.0)
    U, Vh = U.reshape(*batch, *U.shape[-2:]), Vh.reshape(*batch, *Vh.shape[-2:])
    x = (Vh.mT * inv.unsqueeze(-2)) @ (U.mT @ rhs)
    empty = self.new_empty(0)
    r = empty.to(torch.int64)
    if driver != "gels":
        r = keep.to(torch.int32).sum(-1).to(torch.int64) if S.shape[-1] else torch.zeros(
            batch, dtype=torch.int64, device=self.device)
    res = empty
    # LAPACK leaves the residuals of a tall full-rank problem behind the solution; gelsy does not report them
    if m > n and driver != "gelsy" and (driver == "gels" or bool((r == n).all().item())):
        res = (A @ x - rhs).square().sum(-2)
        res = res.squeeze(-1) if vector else res
    x = x.squeeze(-1) if vector else x
    sv = S if driver in ("gelsd", "gelss") else empty
    return (write_out(solution, x), write_out(residuals, res), write_out(rank, r),
            write_out(singular_values, sv))


# ---- matrix exponential --------------------------------------------------------------------------------

_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
           129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0, 40840800.0,
           960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152  # largest 1-norm for which degree 13 is accurate to double precision


def _matrix_exp(A: torch.Tensor) -> torch.Tensor:
    check_matrix("torch.linalg.matrix_exp", A)
    n = A.shape[-1]
    if A.numel() == 0:
        return A.clone()
    X = flat(A).contiguous()
    norm = X.abs().sum(-2).amax(-1)  # 1-norm of each matrix
    squarings = torch.clamp(torch.ceil(torch.log2(norm / _THETA13)), min=0.0)
    most = int(squarings.amax().item())  # the loop count of the squaring phase (one scalar read back)
    X = X * torch.exp2(-squarings).reshape(-1, 1, 1)
    c = [x / _PADE13[0] for x in _PADE13]  # scaled so the constant term is 1 (float32 range)
    eye = torch.eye(n, dtype=A.dtype, device=A.device).expand_as(X)
    X2 = X @ X
    X4 = X2 @ X2
    X6 = X4 @ X2
    u = X @ (X6 @ (c[13] * X6 + c[11] * X4 + c[9] * X2) + c[7] * X6 + c[5] * X4 + c[3] * X2 + c[1] * eye)
    v = X6 @ (c[12] * X6 + c[10] * X4 + c[8] * X2) + c[6] * X6 + c[4] * X4 + c[2] * X2 + c[0] * eye
    LU, piv, _ = lu_factor(v - u)
    E = lu_solve(LU, piv, (v + u).contiguous())
    for step in range(most):
        E = torch.where((squarings > step).reshape(-1, 1, 1), E @ E, E)
    return E.reshape(A.shape)


@register("linalg_matrix_exp", planned=False)
def matrix_exp(self):
    """torch.linalg.matrix_exp: scaling and squaring of a degree-13 Pade approximant."""
    return _matrix_exp(self)

