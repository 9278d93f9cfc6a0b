"""Aten kernels for matrix products (the kernel library's matmul family, kernels/matmul.py): mm, bmm, addmm,
baddbmm, mv, addmv, dot, and their out= / in-place forms. matmul and linear are aten composites that land
here."""

from __future__ import annotations

import torch

from ..kernels.matmul import FAMILY, Layout, MatmulProblem, split_for_binding
from ..runtime import BufferSlice
from .codegen.dtypes import storage_name
from .codegen.operand import Operand
from .elementwise import operand, prepare_out
from .library_launch import device_caps, run_family
from .reductions import cast_into
from .registry import register
from .tensor_buffers import new_empty, runtime


def library_handles(dtype: torch.dtype) -> bool:
    """True when the matmul family's tuned variants compute `dtype` on this device (f32; f16 with
    shader-f16); other dtypes take its general variant into an f32 (or int32) result."""
    return dtype == torch.float32 or (dtype == torch.float16 and device_caps().shader_f16)


def launch_matmul(a: Operand, b: Operand, out: Operand, like: torch.Tensor, bias: Operand | None = None,
                  alpha: float = 1.0, beta: float = 0.0) -> None:
    """Record out = alpha * a @ b + beta * bias for 3-d operands [batch, rows, cols] (bias broadcast by its
    strides) through the matmul family: the autotuner's variant for f32/f16 (split into several launches
    where an operand exceeds the binding limit), the general one for operands stored unlike `out` (bf16,
    f16 without shader-f16) and int32 (exact wrapping products)."""
    batch, m, k = a.sizes
    n = b.sizes[2]
    if batch == 0 or m == 0 or n == 0:
        return

    def lay(o: Operand) -> Layout:
        return Layout(o.offset, *o.strides)

    dtype, in_dtype = storage_name(out.dtype, "matmul"), storage_name(a.dtype, "matmul")
    p = MatmulProblem(batch, m, n, k, lay(a), lay(b), lay(out), dtype=dtype,
                      bias=lay(bias) if bias is not None else None, alpha=float(alpha), beta=float(beta),
                      in_dtype=in_dtype if in_dtype != dtype else None)
    ids = {"a": a.buffer_id, "b": b.buffer_id, "out": out.buffer_id}
    if bias is not None:
        ids["bias"] = bias.buffer_id
    if p.general:
        run_family(FAMILY, p, ids, like)
        return
    rt, caps = runtime(), device_caps()
    align = caps.limit("min-storage-buffer-offset-alignment", 256)
    sizes = {role: rt.buffer(i).aligned_nbytes for role, i in ids.items()}
    for piece in split_for_binding(p, out.dtype.itemsize, rt.max_storage_binding, align, rt.max_workgroups,
                                   sizes):
        operands = dict(ids) if piece.windows is None else {
            role: BufferSlice(ids[role], *piece.windows[role]) for role in ids}
        run_family(FAMILY, piece.problem, operands, like)


def _as3(t: torch.Tensor, shape3: tuple[int, int, int]) -> Operand:
    """A 1/2/3-d tensor as a [batch, rows, cols] operand (stride 0 for a missing batch)."""
    o = operand(t)
    if t.dim() == 3:
        return o
    if t.dim() == 2:
        return Operand(o.buffer_id, o.offset, o.dtype, shape3, (0, *o.strides))
    raise ValueError("expected a 2-d or 3-d tensor")


def _check_float(op: str, *tensors: torch.Tensor) -> torch.dtype:
    dtype = tensors[0].dtype
    for t in tensors:
        if t.device.type != "webgpu":
            raise RuntimeError(f"webgpu: '{op}' expected all tensors on webgpu, got one on {t.device}")
        if t.dtype != dtype:
            raise RuntimeError(f"{op}: expected m1 and m2 to have the same dtype, but got: "
                               f"{dtype} != {t.dtype}")
    if dtype not in (torch.float32, torch.float16, torch.bfloat16, torch.int32):
        raise TypeError(f"webgpu: '{op}' supports float32/float16/bfloat16/int32, got {dtype}")
    return dtype


def _product(op: str, a: torch.Tensor, b: torch.Tensor, dst: torch.Tensor, bias: torch.Tensor | None = None,
             alpha: float = 1.0, beta: float = 0.0) -> torch.Tensor:
    """dst = alpha * a @ b + beta * bias for 2-d or 3-d a, b (dst shaped like the product)."""
    batched = a.dim() == 3
    bsz = a.shape[0] if batched else 1
    m, k = a.shape[-2], a.shape[-1]
    n = b.shape[-1]
    library = library_handles(dst.dtype)  # f32 and f16 (shader-f16): the tuned variants, in place
    # int32: exact wrapping arithmetic; bf16 (and f16 without shader-f16): f32 result, then cast
    wide = dst.dtype if library else torch.int32 if dst.dtype == torch.int32 else torch.float32
    target = dst if dst.dtype == wide else new_empty(dst.shape, wide, dst)
    if target.numel():
        if k == 0:
            # empty inner dimension: the product is zero
            if bias is None or beta == 0:
                target.zero_()
            else:
                cast_into(bias.expand(target.shape) * beta, target)
        else:
            bias3 = None
            if bias is not None and beta != 0:
                bias3 = _as3(bias.expand(target.shape), (bsz, m, n))
            launch_matmul(_as3(a, (bsz, m, k)), _as3(b, (bsz, k, n)), _as3(target, (bsz, m, n)), target,
                          bias3, alpha, beta)
    if target is not dst:
        cast_into(target, dst)
    return dst


def _mm_shapes(op: str, a: torch.Tensor, b: torch.Tensor) -> None:
    if a.dim() != 2 or b.dim() != 2:
        raise RuntimeError(f"{op}: self must be a matrix" if a.dim() != 2 else f"{op}: mat2 must be a matrix")
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x{a.shape[1]} and "
                           f"{b.shape[0]}x{b.shape[1]})")


@register("mm")
def mm(self, mat2):
    """torch.mm."""
    dtype = _check_float("mm", self, mat2)
    _mm_shapes("mm", self, mat2)
    return _product("mm", self, mat2, new_empty((self.shape[0], mat2.shape[1]), dtype, self))


@register("mm.out")
def mm_out(self, mat2, *, out):
    """torch.mm(out=)."""
    _check_float("mm", self, mat2)
    _mm_shapes("mm", self, mat2)
    dst = prepare_out("mm", (self.shape[0], mat2.shape[1]), self.dtype, out, None, self)
    return _product("mm", self, mat2, dst)


def _bmm_shapes(a: torch.Tensor, b: torch.Tensor) -> None:
    if a.dim() != 3 or b.dim() != 3:
        raise RuntimeError("batch1 must be a 3D tensor" if a.dim() != 3 else "batch2 must be a 3D tensor")
    if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{a.shape[0]}, {a.shape[2]}] but got: [{b.shape[0]}, {b.shape[1]}].")


@register("bmm")
def bmm(self, mat2):
    """torch.bmm."""
    dtype = _check_float("bmm", self, mat2)
    _bmm_shapes(self, mat2)
    return _product("bmm", self, mat2, new_empty((self.shape[0], self.shape[1], mat2.shape[2]), dtype, self))


@register("bmm.out")
def bmm_out(self, mat2, *, out):
    """torch.bmm(out=)."""
    _check_float("bmm", self, mat2)
    _bmm_shapes(self, mat2)
    dst = prepare_out("bmm", (self.shape[0], self.shape[1], mat2.shape[2]), self.dtype, out, None, self)
    return _product("bmm", self, mat2, dst)


def _addmm(self, mat1, mat2, beta, alpha, out=None, inplace=False):
    _check_float("addmm", self, mat1, mat2)
    _mm_shapes("addmm", mat1, mat2)
    shape = (mat1.shape[0], mat2.shape[1])
    torch.broadcast_shapes(self.shape, shape)
    dst = prepare_out("addmm", shape, mat1.dtype, out, self if inplace else None, mat1)
    bias = self
    if inplace:
        bias = self.clone()
    return _product("addmm", mat1, mat2, dst, bias, alpha, beta)


@register("addmm")
def addmm(self, mat1, mat2, *, beta=1, alpha=1):
    """torch.addmm."""
    return _addmm(self, mat1, mat2, beta, alpha)


@register("addmm.out")
def addmm_out(self, mat1, mat2, *, beta=1, alpha=1, out):
    """torch.addmm(out=)."""
    if out is self or (out.data_ptr() == self.data_ptr() and out.numel()):
        return _addmm(self, mat1, mat2, beta, alpha, inplace=True)
    return _addmm(self, mat1, mat2, beta, alpha, out)


@register("addmm_")
def addmm_inplace(self, mat1, mat2, *, beta=1, alpha=1):
    """Tensor.addmm_."""
    return _addmm(self, mat1, mat2, beta, alpha, inplace=True)


def _baddbmm(self, batch1, batch2, beta, alpha, out=None, inplace=False):
    _check_float("baddbmm", self, batch1, batch2)
    _bmm_shapes(batch1, batch2)
    shape = (batch1.shape[0], batch1.shape[1], batch2.shape[2])
    torch.broadcast_shapes(self.shape, shape)
    dst = prepare_out("baddbmm", shape, batch1.dtype, out, self if inplace else None, batch1)
    bias = self.clone() if inplace else self
    return _product("baddbmm", batch1, batch2, dst, bias, alpha, beta)


@register("baddbmm")
def baddbmm(self, batch1, batch2, *, beta=1, alpha=1):
    """torch.baddbmm."""
    return _baddbmm(self, batch1, batch2, beta, alpha)


@register("baddbmm.out")
def baddbmm_out(self, batch1, batch2, *, beta=1, alpha=1, out):
    """torch.baddbmm(out=)."""
    return _baddbmm(self, batch1, batch2, beta, alpha, out)


@register("baddbmm_")
def baddbmm_inplace(self, batch1, batch2, *, beta=1, alpha=1):
    """Tensor.baddbmm_."""
    return _baddbmm(self, batch1, batch2, beta, alpha, inplace=True)


def _mv(op, self, vec, bias=None, beta=0.0, alpha=1.0, out=None):
    _check_float(op, self, vec)
    if self.dim() != 2 or vec.dim() != 1 or self.shape[1] != vec.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({self.shape[0]}), mat "
                           f"({self.shape[0]}x{self.shape[1]}), vec ({vec.shape[0]})")
    dst = prepare_out(op, (self.shape[0],), self.dtype, out, None, self)
    b2 = None if bias is None else bias.expand(self.shape[0]).unsqueeze(1)
    _product(op, self, vec.unsqueeze(1), dst.unsqueeze(1), b2, alpha, beta)
    return dst


@register("mv")
def mv(self, vec):
    """torch.mv."""
    return _mv("mv", self, vec)


@register("mv.out")
def mv_out(self, vec, *, out):
    """torch.mv(out=)."""
    return _mv("mv", self, vec, out=out)


@register("addmv")
def addmv(self, mat, vec, *, beta=1, alpha=1):
    """torch.addmv."""
    return _mv("addmv", mat, vec, self, beta, alpha)


@register("addmv.out")
def addmv_out(self, mat, vec, *, beta=1, alpha=1, out):
    """torch.addmv(out=)."""
    return _mv("addmv", mat, vec, self, beta, alpha, out)


@register("dot")
def dot(self, tensor):
    """torch.dot."""
    _check_float("dot", self, tensor)
    if self.dim() != 1 or tensor.dim() != 1:
        raise RuntimeError(f"1D tensors expected, but got {self.dim()}D and {tensor.dim()}D tensors")
    if self.shape[0] != tensor.shape[0]:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{self.shape[0]}] and src "
                           f"[{tensor.shape[0]}] to have the same number of elements, but got "
                           f"{self.shape[0]} and {tensor.shape[0]} elements respectively")
    dst = new_empty((), self.dtype, self)
    _product("dot", self.unsqueeze(0), tensor.unsqueeze(1), dst.reshape(1, 1))
    return dst
