"""Aten kernels for LU-, Cholesky- and triangular-based linear algebra on batched float32 matrices:
lu_factor(_ex), lu, lu_solve, solve(_ex), inv(_ex), det, slogdet, cholesky(_ex), solve_triangular,
triangular_solve, cholesky_solve, cholesky_inverse, lu_unpack, and _linalg_check_errors.

Factorizations run one workgroup per matrix (codegen/linalg_kernels.py); solves one invocation per
right-hand column. Info codes follow LAPACK, so torch's own `_linalg_check_errors` messages apply.
"""

from __future__ import annotations

import torch

from .codegen import linalg_kernels
from .linalg_batch import (
    check_errors as raise_for_info,
)
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
    trsm,
    work_copy,
)
from .out_args import write_out
from .registry import register
from .tensor_buffers import new_empty


@register("_linalg_check_errors", planned=False)
def linalg_check_errors(info, api_name, *, is_matrix):
    """torch's error for nonzero info codes (the codes are read back; the check is torch's CPU one)."""
    raise_for_info(info, api_name, is_matrix)


def _batch(A: torch.Tensor) -> tuple[int, ...]:
    return tuple(A.shape[:-2])


# ---- LU ------------------------------------------------------------------------------------------------

def _lu_factor(op: str, A: torch.Tensor, pivot: bool):
    check_matrix(op, A, square=False)
    if not pivot:
        raise RuntimeError(f"{op}: LU without pivoting is not implemented on the webgpu device "
                           "(nor on the CPU)")
    m, n = A.shape[-2:]
    LU, piv, info = lu_factor(A)
    batch = _batch(A)
    return LU.reshape(A.shape), piv.reshape(*batch, min(m, n)), info.reshape(batch)


@register("linalg_lu_factor_ex.out", planned=False)
def lu_factor_ex_out(A, *, pivot=True, check_errors=False, LU, pivots, info):
    """torch.linalg.lu_factor_ex(out=): LU with partial pivoting, one workgroup per matrix."""
    lu, piv, inf = _lu_factor("torch.linalg.lu_factor_ex", A, pivot)
    if check_errors:
        raise_for_info(inf, "torch.linalg.lu_factor_ex", A.dim() == 2)
    return write_out(LU, lu), write_out(pivots, piv), write_out(info, inf)


@register("linalg_lu_factor_ex", planned=False)
def lu_factor_ex(A, *, pivot=True, check_errors=False):
    """torch.linalg.lu_factor_ex."""
    lu, piv, inf = _lu_factor("torch.linalg.lu_factor_ex", A, pivot)
    if check_errors:
        raise_for_info(inf, "torch.linalg.lu_factor_ex", A.dim() == 2)
    return lu, piv, inf


def _permutation(piv: torch.Tensor, m: int) -> torch.Tensor:
    """P [b, m, m] with A = P L U from LAPACK pivots [b, k]: the interchanges applied to I, transposed."""
    b = piv.shape[0]
    eye = torch.eye(m, dtype=torch.float32, device=piv.device).expand(b, m, m).contiguous()
    X = eye.clone()
    trsm(eye, X, lower=True, pivots=piv, solve=False)
    return X.mT


def _unpack(LU: torch.Tensor, piv: torch.Tensor, m: int, n: int):
    k = min(m, n)
    eye = torch.eye(m, k, dtype=LU.dtype, device=LU.device)
    L = LU[..., :, :k].tril(-1) + eye
    U = LU[..., :k, :].triu()
    P = _permutation(flat(piv, 1).contiguous(), m).reshape(*LU.shape[:-2], m, m)
    return P, L, U


@register("linalg_lu.out", planned=False)
def linalg_lu_out(A, *, pivot=True, P, L, U):
    """torch.linalg.lu(out=): A = P L U."""
    lu, piv, _ = _lu_factor("torch.linalg.lu", A, pivot)
    p, lo, up = _unpack(lu, piv, A.shape[-2], A.shape[-1])
    return write_out(P, p), write_out(L, lo), write_out(U, up)


@register("lu_unpack.out", planned=False)
def lu_unpack_out(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True, *, P, L, U):
    """torch.lu_unpack(out=)."""
    m, n = LU_data.shape[-2:]
    p, lo, up = _unpack(LU_data, LU_pivots.to(torch.int32), m, n)
    empty = LU_data.new_empty(0)
    return (write_out(P, p if unpack_pivots else empty), write_out(L, lo if unpack_data else empty),
            write_out(U, up if unpack_data else empty))


def _broadcast(LU: torch.Tensor, piv: torch.Tensor, B: torch.Tensor):
    """LU [b, n, n], pivots [b, n], B [b, n, k] contiguous over the broadcast batch; the batch shape."""
    batch = torch.broadcast_shapes(LU.shape[:-2], B.shape[:-2])
    n = LU.shape[-1]
    LU3 = flat(LU.expand(*batch, n, n)).contiguous()
    piv3 = flat(piv.to(torch.int32).expand(*batch, n), 1).contiguous()
    X = work_copy(B.expand(*batch, *B.shape[-2:]))
    return LU3, piv3, X, batch


def _lu_solve(LU, pivots, B, left=True, adjoint=False):
    check_matrix("torch.linalg.lu_solve", LU, name="LU")
    if B.dim() < 2:
        raise RuntimeError("linalg.lu_solve: The input tensor B must have at least 2 dimensions.")
    if not left:  # X A = B  <=>  A^T X^T = B^T
        return _lu_solve(LU, pivots, B.mT, True, not adjoint).mT
    if B.shape[-2] != LU.shape[-1]:
        raise RuntimeError(f"linalg.lu_solve: Incompatible shapes of A and B for the equation AX = B "
                           f"({LU.shape[-2]}x{LU.shape[-1]} and {B.shape[-2]}x{B.shape[-1]})")
    LU3, piv3, X, batch = _broadcast(LU, pivots, B)
    lu_solve(LU3, piv3, X, adjoint)
    return X.reshape(*batch, *B.shape[-2:])


@register("linalg_lu_solve.out", planned=False)
def linalg_lu_solve_out(LU, pivots, B, *, left=True, adjoint=False, out):
    """torch.linalg.lu_solve(out=)."""
    return write_out(out, _lu_solve(LU, pivots, B, left, adjoint))


@register("linalg_lu_solve", planned=False)
def linalg_lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    """torch.linalg.lu_solve."""
    return _lu_solve(LU, pivots, B, left, adjoint)


# ---- solve / inv ---------------------------------------------------------------------------------------

def _is_vector_rhs(A: torch.Tensor, B: torch.Tensor) -> bool:
    return B.dim() == 1 or (A.dim() - 1 == B.dim() and tuple(B.shape) == tuple(A.shape[:-1]))


@register("_linalg_solve_ex.result", planned=False)
def solve_ex_out(A, B, *, left=True, check_errors=False, result, LU, pivots, info):
    """torch.linalg.solve_ex(out=): LU factor A, then two triangular solves per right-hand column."""
    check_matrix("torch.linalg.solve", A)
    lu, piv, inf = _lu_factor("torch.linalg.solve", A, True)
    if check_errors:
        raise_for_info(inf, "torch.linalg.solve_ex", A.dim() == 2)
    vector = _is_vector_rhs(A, B)
    rhs = B.unsqueeze(-1) if vector else B
    if left and rhs.shape[-2] != A.shape[-1] or not left and rhs.shape[-1] != A.shape[-2]:
        raise RuntimeError("linalg.solve: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({A.shape[-2]}x{A.shape[-1]} and "
                           f"{rhs.shape[-2]}x{rhs.shape[-1]})")
    x = _lu_solve(lu, piv, rhs, left)
    x = x.squeeze(-1) if vector else x
    return write_out(result, x), write_out(LU, lu), write_out(pivots, piv), write_out(info, inf)


def _inv(A: torch.Tensor):
    check_matrix("torch.linalg.inv", A)
    lu, piv, inf = _lu_factor("torch.linalg.inv", A, True)
    n = A.shape[-1]
    eye = torch.eye(n, dtype=A.dtype, device=A.device).expand(A.shape)
    return _lu_solve(lu, piv, eye), inf


@register("linalg_inv_ex.inverse", planned=False)
def inv_ex_out(A, *, check_errors=False, inverse, info):
    """torch.linalg.inv_ex(out=): LU factor, then solve against the identity."""
    inv, inf = _inv(A)
    if check_errors:
        raise_for_info(inf, "torch.linalg.inv_ex", A.dim() == 2)
    return write_out(inverse, inv), write_out(info, inf)


@register("linalg_inv_ex", planned=False)
def inv_ex(A, *, check_errors=False):
    """torch.linalg.inv_ex."""
    inv, inf = _inv(A)
    if check_errors:
        raise_for_info(inf, "torch.linalg.inv_ex", A.dim() == 2)
    return inv, inf


# ---- det / slogdet -------------------------------------------------------------------------------------

def _det_parts(op: str, A: torch.Tensor):
    """(det, sign, log|det|) each of A's batch shape, and the LU factorization (of A^T when A is
    contiguous, as torch's backward formulas expect; det(A^T) = det(A))."""
    check_matrix(op, A)
    lu, piv, _ = _lu_factor(op, A.mT if A.is_contiguous() else A, True)
    n = A.shape[-1]
    batch = _batch(A)
    lu3, piv3 = flat(lu), flat(piv, 1)
    b = lu3.shape[0]
    out = new_empty((b, 3), torch.float32, A)
    if b and not n:  # the empty product: det 1, sign 1, log|det| 0
        out.copy_(torch.tensor([1.0, 1.0, 0.0], device=A.device).expand(b, 3))
    elif b:
        launch("lu_det", [b, n, offset(lu3), offset(piv3)], [lu3, piv3, out], per_invocation(b))
    return out[:, 0].reshape(batch), out[:, 1].reshape(batch), out[:, 2].reshape(batch), lu, piv


@register("_linalg_det.result", planned=False)
def det_out(A, *, result, LU, pivots):
    """torch.linalg.det(out=): product of U's diagonal, signed by the pivots' parity."""
    det, _, _, lu, piv = _det_parts("torch.linalg.det", A)
    return write_out(result, det), write_out(LU, lu), write_out(pivots, piv)


@register("_linalg_slogdet.sign", planned=False)
def slogdet_out(A, *, sign, logabsdet, LU, pivots):
    """torch.linalg.slogdet(out=)."""
    _, sgn, logabs, lu, piv = _det_parts("torch.linalg.slogdet", A)
    return write_out(sign, sgn), write_out(logabsdet, logabs), write_out(LU, lu), write_out(pivots, piv)


# ---- Cholesky ------------------------------------------------------------------------------------------

def cholesky_lower(A: torch.Tensor, upper: bool = False):
    """(L or U = L^T of A's batch shape, info): Cholesky of A's lower triangle (upper: of its upper one)."""
    check_matrix("torch.linalg.cholesky", A)
    check_size("cholesky", "torch.linalg.cholesky", A.shape[-2], A.shape[-1])
    W = work_copy(A.mT if upper else A)
    b, n, _ = W.shape
    info = new_empty((b,), torch.int32, A)
    if b and n:
        launch("cholesky", [b, n, offset(W), offset(info)], [W, info], per_matrix(b),
               linalg_kernels.fits_local(n, n))
    elif b:
        info.zero_()
    L = W.reshape(A.shape)
    return (L.mT if upper else L), info.reshape(_batch(A))


@register("linalg_cholesky_ex.L", planned=False)
def cholesky_ex_out(self, *, upper=False, check_errors=False, L, info):
    """torch.linalg.cholesky_ex(out=): one workgroup per matrix, LAPACK potrf info codes."""
    lo, inf = cholesky_lower(self, upper)
    if check_errors:
        raise_for_info(inf, "torch.linalg.cholesky_ex", self.dim() == 2)
    return write_out(L, lo), write_out(info, inf)


@register("cholesky", planned=False)
def cholesky(self, upper=False):
    """torch.cholesky (deprecated API)."""
    lo, inf = cholesky_lower(self, upper)
    raise_for_info(inf, "cholesky", self.dim() == 2)
    return lo.contiguous()


def _cholesky_solve(B: torch.Tensor, L: torch.Tensor, upper: bool) -> torch.Tensor:
    """Solve (L L^T) X = B (upper: (U^T U) X = B) for batched B and factor."""
    check_matrix("cholesky_solve", L)
    batch = torch.broadcast_shapes(L.shape[:-2], B.shape[:-2])
    n = L.shape[-1]
    T = flat(L.expand(*batch, n, n)).contiguous()
    X = work_copy(B.expand(*batch, *B.shape[-2:]))
    # lower: L y = B, L^T x = y; upper: U^T y = B, U x = y
    trsm(T, X, lower=not upper, transpose=False)
    trsm(T, X, lower=upper, transpose=True)
    return X.reshape(*batch, *B.shape[-2:])


@register("_cholesky_solve_helper", planned=False)
def cholesky_solve_helper(self, A, upper):
    """torch.cholesky_solve's kernel: two triangular solves."""
    return _cholesky_solve(self, A, upper)


@register("cholesky_inverse", planned=False)
def cholesky_inverse(self, upper=False):
    """torch.cholesky_inverse: (L L^T)^-1 by solving against the identity."""
    n = self.shape[-1]
    eye = torch.eye(n, dtype=self.dtype, device=self.device).expand(self.shape)
    return _cholesky_solve(eye, self, upper)


# ---- triangular solves ---------------------------------------------------------------------------------

def _solve_triangular(A: torch.Tensor, B: torch.Tensor, upper: bool, left: bool, unit: bool) -> torch.Tensor:
    check_matrix("torch.linalg.solve_triangular", A)
    if B.dim() < 2:
        raise RuntimeError("linalg.solve_triangular: The input tensor B must have at least 2 dimensions.")
    if not left:  # X A = B  <=>  A^T X^T = B^T (A^T has the other triangle)
        return _solve_triangular(A.mT, B.mT, not upper, True, unit).mT
    n = A.shape[-1]
    if B.shape[-2] != n:
        raise RuntimeError(f"linalg.solve_triangular: Incompatible shapes of A and B for the equation AX = B "
                           f"({A.shape[-2]}x{n} and {B.shape[-2]}x{B.shape[-1]})")
    batch = torch.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    T = flat(A.expand(*batch, n, n)).contiguous()
    X = work_copy(B.expand(*batch, *B.shape[-2:]))
    trsm(T, X, lower=not upper, unit=unit)
    return X.reshape(*batch, *B.shape[-2:])


@register("linalg_solve_triangular", planned=False)
def solve_triangular(self, B, *, upper, left=True, unitriangular=False):
    """torch.linalg.solve_triangular: one invocation per right-hand column (substitution)."""
    return _solve_triangular(self, B, upper, left, unitriangular)


@register("linalg_solve_triangular.out", planned=False)
def solve_triangular_out(self, B, *, upper, left=True, unitriangular=False, out):
    """torch.linalg.solve_triangular(out=)."""
    return write_out(out, _solve_triangular(self, B, upper, left, unitriangular))


@register("triangular_solve.X", planned=False)
def triangular_solve_out(self, A, upper=True, transpose=False, unitriangular=False, *, X, M):
    """torch.triangular_solve(out=): solution of op(A) X = self and a copy of A."""
    T = A.mT if transpose else A
    sol = _solve_triangular(T, self, upper != transpose, True, unitriangular)
    return write_out(X, sol), write_out(M, A.clone())


# ---- LDL^T (Bunch-Kaufman) -----------------------------------------------------------------------------

@register("linalg_ldl_factor_ex.out", planned=False)
def ldl_factor_ex_out(self, *, hermitian=False, check_errors=False, LD, pivots, info):
    """torch.linalg.ldl_factor_ex(out=): LAPACK sytf2 pivoting (lower), one invocation per matrix."""
    check_matrix("torch.linalg.ldl_factor_ex", self)
    W = work_copy(self)
    b, n, _ = W.shape
    piv = new_empty((b, n), torch.int32, self)
    inf = new_empty((b,), torch.int32, self)
    if b and n:
        launch("ldl", [b, n, offset(W), offset(piv), offset(inf)], [W, piv, inf], per_invocation(b))
    elif b:
        inf.zero_()
    inf = inf.reshape(_batch(self))
    if check_errors:
        raise_for_info(inf, "torch.linalg.ldl_factor_ex", self.dim() == 2)
    return (write_out(LD, W.reshape(self.shape)), write_out(pivots, piv.reshape(*_batch(self), n)),
            write_out(info, inf))


@register("linalg_ldl_solve.out", planned=False)
def ldl_solve_out(LD, pivots, B, *, hermitian=False, out):
    """torch.linalg.ldl_solve(out=): LAPACK sytrs (lower), one invocation per right-hand column."""
    check_matrix("torch.linalg.ldl_solve", LD, name="LD")
    if B.dim() < 2 or B.shape[-2] != LD.shape[-1]:
        raise RuntimeError("torch.linalg.ldl_solve: Incompatible shapes of LD and B for the equation "
                           f"LD X = B ({LD.shape[-2]}x{LD.shape[-1]} and {tuple(B.shape[-2:])})")
    LD3, piv3, X, batch = _broadcast(LD, pivots, B)
    b, n, k = X.shape
    if b and n and k:
        launch("ldl_solve", [b * k, n, k, offset(LD3), offset(X), offset(piv3)], [LD3, X, piv3],
               per_invocation(b * k))
    return write_out(out, X.reshape(*batch, *B.shape[-2:]))
