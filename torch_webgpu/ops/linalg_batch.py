"""Shared plumbing of the dense linear algebra kernels: batched f32 working copies and their launches.

The solvers work on row-major [batch, rows, cols] float32 copies (kernels factor in place); results are
viewed back to the caller's batch shape. Launches go through runtime.dispatch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ..runtime import get_runtime
from .codegen import linalg_kernels
from .codegen.elementwise import grid
from .codegen.operand import pack_u32
from .tensor_buffers import new_empty, windowed_binding


def check_matrix(op: str, A: torch.Tensor, square: bool = True, name: str = "A") -> None:
    """torch's checks of a (batch of) float32 matrix argument, with webgpu's dtype limits."""
    if A.device.type != "webgpu":
        raise RuntimeError(f"webgpu: '{op}' expected a webgpu tensor, got one on {A.device}")
    if A.dim() < 2:
        raise RuntimeError(f"{op}: The input tensor {name} must have at least 2 dimensions.")
    if A.dtype != torch.float32:
        raise TypeError(f"webgpu: '{op}' supports float32 matrices, got {A.dtype} (float64 and complex are "
                        f"not WebGPU dtypes; convert with .float())")
    if square and A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{op}: {name} must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")


def flat(t: torch.Tensor, dims: int = 2) -> torch.Tensor:
    """t with its batch dims (all but the last `dims`) merged into one (also for empty tensors)."""
    batch = math.prod(t.shape[:-dims]) if t.dim() > dims else 1
    return t.reshape(batch, *t.shape[t.dim() - dims:])


def check_size(family: str, op: str, rows: int, cols: int) -> None:
    """A clear error for matrices larger than the workgroup-per-matrix kernel of `family` handles."""
    limit = linalg_kernels.MAX_DIM[family]
    if max(rows, cols) > limit and min(rows, cols) > 0:
        raise NotImplementedError(f"webgpu: '{op}' on {rows}x{cols} matrices: the device's {family} kernel "
                                  f"(one workgroup per matrix) handles dimensions up to {limit}")


def work_copy(A: torch.Tensor) -> torch.Tensor:
    """A fresh contiguous [batch, rows, cols] float32 copy of A (kernels overwrite it)."""
    return flat(A).clone(memory_format=torch.contiguous_format)


def bind(t: torch.Tensor):
    """(binding, element offset) of a contiguous webgpu tensor."""
    return windowed_binding(t)


def launch(family: str, words: Sequence[int], tensors: Sequence[torch.Tensor], groups: tuple[int, int, int],
           local: bool = True) -> None:
    """Dispatch one linalg family: parameter words, then the tensors as bindings 1.. in template order."""
    rt = get_runtime()
    bindings = [rt.constant(pack_u32(words))]
    bindings += [bind(t)[0] for t in tensors]
    rt.dispatch(linalg_kernels.kernel(family, local), bindings, groups, label=f"linalg_{family}")


def offset(t: torch.Tensor) -> int:
    """Element offset of a contiguous webgpu tensor inside its binding."""
    return bind(t)[1]


def per_matrix(batch: int) -> tuple[int, int, int]:
    """Workgroup counts for one workgroup per matrix."""
    return grid(batch, 1)


def per_invocation(work: int) -> tuple[int, int, int]:
    """Workgroup counts for one invocation per work item."""
    return grid(work, linalg_kernels.WG)


def lu_factor(A: torch.Tensor):
    """(LU [b, m, n], pivots int32 [b, k], info int32 [b]) of the matrices of A (any batch shape)."""
    check_size("lu", "torch.linalg.lu_factor", A.shape[-2], A.shape[-1])
    W = work_copy(A)
    b, m, n = W.shape
    k = min(m, n)
    piv = new_empty((b, k), torch.int32, A)
    info = new_empty((b,), torch.int32, A)
    if b and m and n:
        local = linalg_kernels.fits_local(m, n)
        launch("lu", [b, m, n, offset(W), offset(piv), offset(info)], [W, piv, info], per_matrix(b), local)
    elif b:
        info.zero_()
    return W, piv, info


def trsm(T: torch.Tensor, X: torch.Tensor, lower: bool, unit: bool = False, transpose: bool = False,
         pivots: torch.Tensor | None = None, pivots_first: bool = True, solve: bool = True) -> torch.Tensor:
    """Solve op(T) X = X in place for [b, n, n] T (op: transpose or not) and [b, n, k] X; with pivots,
    interchange X's rows first (LAPACK order) or last (reverse order)."""
    b, n, k = X.shape
    if not (b and n and k):
        return X
    flags = (1 if lower else 0) | (2 if unit else 0) | (0 if solve else 16)
    si, sj = (1, n) if transpose else (n, 1)
    piv_t, npiv = T, 0
    if pivots is not None:
        flags |= 4 if pivots_first else 8
        piv_t, npiv = pivots, pivots.shape[-1]
    words = [b * k, n, k, offset(T), offset(X), offset(piv_t), flags, n * n, si, sj, npiv]
    launch("trsm", words, [T, X, piv_t], per_invocation(b * k))
    return X


def lu_solve(LU: torch.Tensor, pivots: torch.Tensor, X: torch.Tensor, adjoint: bool = False) -> torch.Tensor:
    """Solve A X = B (or A^T X = B) in place in X [b, n, k], with A = P L U given by LU [b, n, n], pivots."""
    if adjoint:
        trsm(LU, X, lower=True, transpose=True)  # U^T
        return trsm(LU, X, lower=False, unit=True, transpose=True, pivots=pivots, pivots_first=False)  # L^T
    trsm(LU, X, lower=True, unit=True, pivots=pivots)
    return trsm(LU, X, lower=False)


def check_errors(info: torch.Tensor, api_name: str, is_matrix: bool) -> None:
    """torch's errors for nonzero LAPACK-style info codes (reads the codes back)."""
    torch.ops.aten._linalg_check_errors(info.cpu(), api_name, is_matrix=is_matrix)
