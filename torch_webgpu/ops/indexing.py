"""Aten indexing and shape kernels: index_select, gather, scatter/scatter_add, index_add, embedding
(+dense backward), masked_fill, cat/stack, flip, roll, tril/triu, constant_pad_nd, index.Tensor (one
index tensor), nonzero (its size is read back, as on CUDA)."""

from __future__ import annotations

import torch

from .codegen.dtypes import dtype_info
from .codegen.indexing import launch_gather, launch_scatter
from .codegen.operand import Operand
from .elementwise import broadcast_shapes, operand, run_formula
from .out_args import write_out
from .reductions import cast_into
from .registry import register
from .tensor_buffers import new_empty


def _wide(dtype: torch.dtype) -> torch.dtype:
    """The 32-bit dtype a packed dtype is computed in."""
    info = dtype_info(dtype)
    if not info.packed:
        return dtype
    return torch.float32 if info.kind == "f32" else torch.int32


def _check_index(op: str, index: torch.Tensor) -> None:
    if index.dtype not in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
        raise RuntimeError(f"{op}(): Expected dtype int32/int64 for index but got: {index.dtype}")
    if index.device.type != "webgpu":
        raise RuntimeError(f"{op}(): expected index on webgpu, got {index.device}")


def _gather_into(x: torch.Tensor, index_op: Operand, shape, dim: int, dtype: torch.dtype) -> torch.Tensor:
    dtype_info(x.dtype, "gather")
    wide = _wide(dtype)
    out = new_empty(shape, wide, x)
    launch_gather(operand(x), index_op, operand(out), dim)
    return out if wide == dtype else cast_into(out, new_empty(shape, dtype, x))


def _expanded_index(index: torch.Tensor, shape, dim: int) -> Operand:
    """A 1-d index as an operand of `shape` varying only along `dim`."""
    o = operand(index)
    strides = [0] * len(shape)
    strides[dim] = o.strides[0] if index.dim() else 0
    return Operand(o.buffer_id, o.offset, o.dtype, tuple(shape), tuple(strides))


@register("index_select")
def index_select(self, dim, index):
    """torch.index_select."""
    _check_index("index_select", index)
    if index.dim() > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    x = self if self.dim() else self.reshape(1)
    dim = dim % x.dim()
    shape = list(x.shape)
    shape[dim] = index.numel()
    out = _gather_into(x, _expanded_index(index.reshape(-1), shape, dim), shape, dim, self.dtype)
    return out if self.dim() else out.reshape(())


@register("index_select.out")
def index_select_out(self, dim, index, *, out):
    """torch.index_select(out=)."""
    r = index_select(self, dim, index)
    return write_out(out, r)


@register("gather")
def gather(self, dim, index, *, sparse_grad=False):
    """torch.gather."""
    _check_index("gather", index)
    x = self if self.dim() else self.reshape(1)
    idx = index if index.dim() else index.reshape(1)
    if index.numel() == 0:  # torch checks no shapes for an empty index
        return new_empty(index.shape, self.dtype, self)
    if idx.dim() != x.dim():
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    dim = dim % x.dim()
    out = _gather_into(x, operand(idx), tuple(idx.shape), dim, self.dtype)
    return out.reshape(index.shape)


@register("gather.out")
def gather_out(self, dim, index, *, sparse_grad=False, out):
    """torch.gather(out=)."""
    r = gather(self, dim, index)
    return write_out(out, r)


def _scatter(mode: str, self, dim, index, src, alpha=1, include_self=True) -> torch.Tensor:
    _check_index("scatter", index)
    if index.numel() == 0:
        return self.clone()
    x = self if self.dim() else self.reshape(1)
    idx = index if index.dim() else index.reshape(1)
    dim = dim % x.dim()
    wide = _wide(self.dtype)
    base = x if wide == self.dtype else cast_into(x, new_empty(x.shape, wide, x))
    if isinstance(src, torch.Tensor) and src.device.type == "webgpu":
        s = src if src.dim() else src.reshape(1)
        if s.dtype != wide:
            s = cast_into(s, new_empty(s.shape, wide, s))
        src_op = operand(s)
    else:
        src_op = src.item() if isinstance(src, torch.Tensor) else src
    out = new_empty(x.shape, wide, x)
    launch_scatter(mode, operand(base), src_op, operand(idx), operand(out), dim, alpha, include_self)
    if wide != self.dtype:
        out = cast_into(out, new_empty(x.shape, self.dtype, x))
    return out.reshape(self.shape)


@register("scatter.src", "scatter.value")
def scatter(self, dim, index, src):
    """torch.scatter (src tensor or scalar value)."""
    return _scatter("set", self, dim, index, src)


@register("scatter.src_out", "scatter.value_out")
def scatter_out(self, dim, index, src, *, out):
    """torch.scatter(out=)."""
    r = _scatter("set", self, dim, index, src)
    return write_out(out, r)


@register("scatter_.src", "scatter_.value")
def scatter_inplace(self, dim, index, src):
    """Tensor.scatter_."""
    return self.copy_(_scatter("set", self, dim, index, src))


_REDUCE = {"add": "add", "multiply": "mul", "sum": "add", "prod": "mul", "mean": "mean", "amax": "amax",
           "amin": "amin"}


@register("scatter.reduce", "scatter.value_reduce")
def scatter_reduce_legacy(self, dim, index, src, *, reduce):
    """torch.scatter(reduce='add'|'multiply')."""
    return _scatter(_REDUCE[reduce], self, dim, index, src)


@register("scatter.reduce_out", "scatter.value_reduce_out")
def scatter_reduce_legacy_out(self, dim, index, src, *, reduce, out):
    """torch.scatter(reduce=..., out=)."""
    r = _scatter(_REDUCE[reduce], self, dim, index, src)
    return write_out(out, r)


@register("scatter_.reduce", "scatter_.value_reduce")
def scatter_reduce_legacy_inplace(self, dim, index, src, *, reduce):
    """Tensor.scatter_(reduce=...)."""
    return self.copy_(_scatter(_REDUCE[reduce], self, dim, index, src))


@register("scatter_reduce.two")
def scatter_reduce(self, dim, index, src, reduce, *, include_self=True):
    """torch.scatter_reduce (sum/prod/mean/amax/amin)."""
    return _scatter(_REDUCE[reduce], self, dim, index, src, include_self=include_self)


@register("scatter_reduce.two_out")
def scatter_reduce_out(self, dim, index, src, reduce, *, include_self=True, out):
    """torch.scatter_reduce(out=)."""
    r = _scatter(_REDUCE[reduce], self, dim, index, src, include_self=include_self)
    return write_out(out, r)


@register("scatter_reduce_.two")
def scatter_reduce_inplace(self, dim, index, src, reduce, *, include_self=True):
    """Tensor.scatter_reduce_."""
    return self.copy_(_scatter(_REDUCE[reduce], self, dim, index, src, include_self=include_self))


@register("scatter_add")
def scatter_add(self, dim, index, src):
    """torch.scatter_add."""
    return _scatter("add", self, dim, index, src)


@register("scatter_add.out")
def scatter_add_out(self, dim, index, src, *, out):
    """torch.scatter_add(out=)."""
    r = _scatter("add", self, dim, index, src)
    return write_out(out, r)


@register("scatter_add_")
def scatter_add_inplace(self, dim, index, src):
    """Tensor.scatter_add_."""
    return self.copy_(_scatter("add", self, dim, index, src))


def _index_add(self, dim, index, source, alpha, mode="add", include_self=True):
    """index_add (mode 'add'), or index_reduce's prod/mean/amax/amin: source slices scattered at index."""
    _check_index(f"index_{mode}", index)
    if index.numel() == 0 or source.numel() == 0:
        return self.clone()
    x = self if self.dim() else self.reshape(1)
    src = source if source.dim() else source.reshape(1)
    dim = dim % x.dim()
    idx_op = _expanded_index(index.reshape(-1), tuple(src.shape), dim)
    wide = _wide(self.dtype)
    base = x if wide == self.dtype else cast_into(x, new_empty(x.shape, wide, x))
    s = src if src.dtype == wide else cast_into(src, new_empty(src.shape, wide, src))
    out = new_empty(x.shape, wide, x)
    launch_scatter(mode, operand(base), operand(s), idx_op, operand(out), dim, alpha, include_self)
    if wide != self.dtype:
        out = cast_into(out, new_empty(x.shape, self.dtype, x))
    return out.reshape(self.shape)


@register("index_add")
def index_add(self, dim, index, source, *, alpha=1):
    """torch.index_add."""
    return _index_add(self, dim, index, source, alpha)


@register("index_add.out")
def index_add_out(self, dim, index, source, *, alpha=1, out):
    """torch.index_add(out=)."""
    r = _index_add(self, dim, index, source, alpha)
    return write_out(out, r)


@register("index_add_")
def index_add_inplace(self, dim, index, source, *, alpha=1):
    """Tensor.index_add_."""
    return self.copy_(_index_add(self, dim, index, source, alpha))


def _index_reduce(self, dim, index, source, reduce, include_self):
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got "
                           f"{reduce}.")
    if self.dtype != source.dtype:
        raise RuntimeError("index_reduce_(): self and source expected to have the same dtype")
    return _index_add(self, dim, index, source, 1, _REDUCE[reduce], include_self)


@register("index_reduce")
def index_reduce(self, dim, index, source, reduce, *, include_self=True):
    """torch.index_reduce (prod/mean/amax/amin of source slices into self's slices at index)."""
    return _index_reduce(self, dim, index, source, reduce, include_self)


@register("index_reduce.out")
def index_reduce_out(self, dim, index, source, reduce, *, include_self=True, out):
    """torch.index_reduce(out=)."""
    return write_out(out, _index_reduce(self, dim, index, source, reduce, include_self))


@register("index_reduce_")
def index_reduce_inplace(self, dim, index, source, reduce, *, include_self=True):
    """Tensor.index_reduce_."""
    return self.copy_(_index_reduce(self, dim, index, source, reduce, include_self))


# ---- embedding ---------------------------------------------------------------------------------------


@register("embedding")
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """aten.embedding: rows of weight."""
    if weight.dim() != 2:
        raise RuntimeError("'weight' must be 2-D")
    flat = index_select(weight, 0, indices.reshape(-1))
    return flat.reshape(*indices.shape, weight.shape[1])


@register("embedding_dense_backward")
def embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
    """aten.embedding_dense_backward: grad rows summed per index (padding_idx gets none)."""
    if scale_grad_by_freq:
        raise NotImplementedError("webgpu: embedding backward with scale_grad_by_freq=True is not supported")
    d = grad_output.shape[-1]
    g = grad_output.reshape(-1, d)
    idx = indices.reshape(-1)
    if padding_idx is not None and padding_idx >= 0:
        g = g * (idx != padding_idx).unsqueeze(1)
    zeros = torch.zeros((num_weights, d), dtype=grad_output.dtype, device=grad_output.device)
    return _index_add(zeros, 0, idx, g, 1)


# ---- masks, concatenation, reordering ----------------------------------------------------------------

_MASKED = {"f32": "select(a, value, b != 0.0)", "i32": "select(a, value, b != 0)",
           "bool": "select(a, value, b)", "i64": "select(a, value, i64_to_bool(b))"}


def _masked_fill(self, mask, value, out):
    if mask.dtype != torch.bool:
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype {mask.dtype}")
    if isinstance(value, torch.Tensor):
        if value.dim() != 0:
            raise RuntimeError("masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                               f"{value.dim()} dimension(s).")
        value = value.item()
    from .codegen.elementwise import Scalar

    kind = dtype_info(self.dtype, "masked_fill").kind
    v = bool(value) if kind == "bool" else (float(value) if kind == "f32" else int(value))
    shape = torch.broadcast_shapes(self.shape, mask.shape)
    return run_formula("masked_fill", _MASKED[kind], kind, shape, (self, mask), "ab",
                       [Scalar("value", kind, v)], out)


@register("masked_fill.Scalar", "masked_fill.Tensor")
def masked_fill(self, mask, value):
    """torch.masked_fill."""
    shape = torch.broadcast_shapes(self.shape, mask.shape)
    return _masked_fill(self, mask, value, new_empty(shape, self.dtype, self))


@register("masked_fill_.Scalar", "masked_fill_.Tensor")
def masked_fill_inplace(self, mask, value):
    """Tensor.masked_fill_."""
    if torch.broadcast_shapes(self.shape, mask.shape) != self.shape:
        raise RuntimeError("masked_fill_: mask must be broadcastable to self")
    return _masked_fill(self, mask, value, self)


@register("cat", "cat.out")
def cat(tensors, dim=0, *, out=None):
    """torch.cat (each input copied into its slice of the output on device)."""
    ts = [t for t in tensors if not (t.dim() == 1 and t.shape[0] == 0)]
    if not ts:
        r = new_empty((0,), tensors[0].dtype, tensors[0])
        return r if out is None else out.resize_(0)
    ref = ts[0]
    if ref.dim() == 0:
        raise RuntimeError("zero-dimensional tensor (at position 0) cannot be concatenated")
    dim = dim % ref.dim()
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = torch.promote_types(dtype, t.dtype)
    for t in ts:
        if t.dim() != ref.dim() or any(t.shape[d] != ref.shape[d] for d in range(ref.dim()) if d != dim):
            raise RuntimeError(f"Sizes of tensors must match except in dimension {dim}. Expected size "
                               f"{list(ref.shape)} but got size {list(t.shape)}")
    shape = list(ref.shape)
    shape[dim] = sum(t.shape[dim] for t in ts)
    if out is None:
        out = new_empty(shape, dtype, ref)
    else:
        if list(out.shape) != shape:
            out.resize_(shape)
    pos = 0
    for t in ts:
        n = t.shape[dim]
        if n:
            out.narrow(dim, pos, n).copy_(t)
        pos += n
    return out


@register("stack", "stack.out")
def stack(tensors, dim=0, *, out=None):
    """torch.stack."""
    nd = tensors[0].dim() + 1
    dim = dim % nd
    for t in tensors:
        if t.shape != tensors[0].shape:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got "
                               f"{list(tensors[0].shape)} at entry 0 and {list(t.shape)}")
    return cat([t.unsqueeze(dim) for t in tensors], dim, out=out)


@register("flip")
def flip(self, dims):
    """torch.flip (one gather per flipped dim)."""
    out = self
    for d in sorted({d % max(self.dim(), 1) for d in dims}):
        if self.dim() == 0:
            break
        n = self.shape[d]
        idx = torch.arange(n - 1, -1, -1, dtype=torch.int32, device=self.device)
        out = index_select(out, d, idx)
    return out.clone() if out is self else out


@register("roll")
def roll(self, shifts, dims=()):
    """torch.roll."""
    if len(dims) == 0:
        return roll(self.reshape(-1), shifts, [0]).reshape(self.shape)
    out = self
    for s, d in zip(shifts, dims, strict=True):
        n = out.shape[d]
        if n == 0:
            continue
        s = s % n
        if s:
            out = cat([out.narrow(d, n - s, s), out.narrow(d, 0, n - s)], d)
    return out.clone() if out is self else out


def _tri(self, diagonal: int, lower: bool, out=None):
    if self.dim() < 2:
        raise RuntimeError("tril/triu: input tensor must have at least 2 dimensions")
    m, n = self.shape[-2], self.shape[-1]
    rows = torch.arange(m, dtype=torch.int32, device=self.device).unsqueeze(1)
    cols = torch.arange(n, dtype=torch.int32, device=self.device)
    keep = (cols - rows) <= diagonal if lower else (cols - rows) >= diagonal
    if out is None:
        out = new_empty(self.shape, self.dtype, self)
    return _masked_fill(self, ~keep, 0, out)


@register("tril")
def tril(self, diagonal=0):
    """torch.tril."""
    return _tri(self, diagonal, True)


@register("triu")
def triu(self, diagonal=0):
    """torch.triu."""
    return _tri(self, diagonal, False)


@register("tril.out")
def tril_out(self, diagonal=0, *, out):
    """torch.tril(out=)."""
    out.resize_(self.shape)
    return out.copy_(_tri(self, diagonal, True))


@register("triu.out")
def triu_out(self, diagonal=0, *, out):
    """torch.triu(out=)."""
    out.resize_(self.shape)
    return out.copy_(_tri(self, diagonal, False))


@register("tril_")
def tril_inplace(self, diagonal=0):
    """Tensor.tril_."""
    return self.copy_(_tri(self, diagonal, True))


@register("triu_")
def triu_inplace(self, diagonal=0):
    """Tensor.triu_."""
    return self.copy_(_tri(self, diagonal, False))


@register("constant_pad_nd")
def constant_pad_nd(self, pad, value=0):
    """torch.nn.functional.pad(mode='constant')."""
    if len(pad) % 2 or len(pad) // 2 > self.dim():
        raise RuntimeError("Length of pad must be even but instead it equals " + str(len(pad)))
    src = self
    shape = list(self.shape)
    for i in range(len(pad) // 2):
        d = self.dim() - 1 - i
        lo, hi = pad[2 * i], pad[2 * i + 1]
        shape[d] += lo + hi
        if shape[d] < 0:
            raise RuntimeError(f"The input size {self.shape[d]}, plus negative padding {lo} and {hi} "
                               f"resulted in a negative output size, which is invalid. Check dimension {d} "
                               f"of your input.")
        if lo < 0:
            src = src.narrow(d, -lo, src.shape[d] + lo)
        if hi < 0:
            src = src.narrow(d, 0, src.shape[d] + hi)
    out = torch.full(shape, value, dtype=self.dtype, device=self.device)
    dst = out
    for i in range(len(pad) // 2):
        d = self.dim() - 1 - i
        lo = max(pad[2 * i], 0)
        dst = dst.narrow(d, lo, src.shape[d])
    if src.numel():
        dst.copy_(src)
    return out


def _expand_masks(self, indices) -> list:
    """Boolean masks become one int64 index tensor per dim they cover (through nonzero)."""
    out = []
    for t in indices:
        if t is not None and t.dtype in (torch.bool, torch.uint8):
            nz = nonzero(t)
            out.extend(nz[:, j] for j in range(t.dim()))
        else:
            out.append(t)
    if len(out) > self.dim():
        raise IndexError(f"too many indices for tensor of dimension {self.dim()}")
    return out + [None] * (self.dim() - len(out))


def _linear_index(self, indices):
    """(indexed dims, broadcast index shape, flat int64 index into those dims) of advanced indexing."""
    dims = [d for d, t in enumerate(indices) if t is not None]
    for d in dims:
        if indices[d].device.type != "webgpu":
            indices[d] = indices[d].to(self.device)
    bshape = broadcast_shapes(*(indices[d].shape for d in dims))
    lin = None
    for d in dims:
        i = indices[d].to(torch.int64)
        i = torch.where(i < 0, i + self.shape[d], i)  # negative indices count from the end
        lin = i if lin is None else lin * self.shape[d] + i
    return dims, bshape, lin.expand(bshape)


@register("index.Tensor")
def index_tensor(self, indices):
    """x[i, j, mask, ...] advanced indexing (any number of int/bool index tensors)."""
    indices = _expand_masks(self, list(indices))
    dims, bshape, lin = _linear_index(self, indices)
    rest = [d for d in range(self.dim()) if d not in dims]
    adjacent = dims == list(range(dims[0], dims[-1] + 1))
    x = self.permute(dims + rest)
    flat = x.reshape(-1, *[self.shape[d] for d in rest])
    out = index_select(flat, 0, lin.reshape(-1)).reshape(*bshape, *[self.shape[d] for d in rest])
    if adjacent and dims[0] > 0:
        # the indexed block stays where the indexed dims were
        nb, before = len(bshape), dims[0]
        order = list(range(nb, nb + before)) + list(range(nb)) + list(range(nb + before, out.dim()))
        out = out.permute(order)
    return out.contiguous()


@register("nonzero")
def nonzero(self):
    """torch.nonzero: the number of hits is read back (like CUDA), the indices are computed on device."""
    mask = self != 0
    n = int(mask.sum(dtype=torch.float32).item())
    flat_idx = torch.arange(self.numel(), dtype=torch.int32, device=self.device)
    # positions of the hits: the cumulative count gives each hit its output row
    order = (mask.reshape(-1).to(torch.float32).cumsum(0) - 1).to(torch.int32)
    rows = torch.where(mask.reshape(-1), order, torch.full_like(order, n))
    target = torch.zeros(n + 1, dtype=torch.int32, device=self.device)
    target = target.scatter(0, rows, flat_idx)[:n]
    out = new_empty((n, self.dim()), torch.int64, self)
    rem = target
    cols = []
    for size in reversed(self.shape):
        cols.append(rem % size)
        rem = torch.div(rem, size, rounding_mode="floor")
    for j, c in enumerate(reversed(cols)):
        out[:, j].copy_(c)
    return out


# ---- selection by mask / flat index, index_put --------------------------------------------------------


@register("masked_select")
def masked_select(self, mask):
    """torch.masked_select (hit count read back through nonzero)."""
    if mask.dtype != torch.bool:
        raise RuntimeError(f"masked_select: expected BoolTensor for mask, got {mask.dtype}")
    shape = torch.broadcast_shapes(self.shape, mask.shape)
    flat = self.expand(shape).reshape(-1)
    idx = nonzero(mask.expand(shape).reshape(-1)).reshape(-1)
    return index_select(flat, 0, idx)


@register("masked_select.out")
def masked_select_out(self, mask, *, out):
    """torch.masked_select(out=)."""
    r = masked_select(self, mask)
    return write_out(out, r)


@register("take")
def take(self, index):
    """torch.take (flat indices, negative ones count from the end)."""
    _check_index("take", index)
    return index_select(self.reshape(-1), 0, index.reshape(-1)).reshape(index.shape)


@register("vdot")
def vdot(self, other):
    """torch.vdot (real tensors: dot)."""
    return torch.dot(self, other)


def _index_put(self, indices, values, accumulate):
    if values.device != self.device:  # a CPU scalar tensor, as `x[i] = 1.0` passes
        values = values.to(self.device)
    indices = _expand_masks(self, list(indices))
    dims, bshape, lin = _linear_index(self, indices)
    if lin.numel() == 0:
        return self.clone()
    rest = [d for d in range(self.dim()) if d not in dims]
    adjacent = dims == list(range(dims[0], dims[-1] + 1))
    rest_shape = [self.shape[d] for d in rest]
    # values broadcast to the shape x[indices] has, then laid out as [index, rest...]
    if adjacent and dims[0] > 0:
        res_shape = [self.shape[d] for d in range(dims[0])] + list(bshape) + rest_shape[dims[0]:]
        v = values.to(self.dtype).expand(res_shape)
        nb, before = len(bshape), dims[0]
        v = v.permute(list(range(before, before + nb)) + list(range(before))
                      + list(range(before + nb, v.dim())))
    else:
        v = values.to(self.dtype).expand(*bshape, *rest_shape)
    v = v.reshape(-1, *rest_shape)
    perm = dims + rest
    x = self.permute(perm).contiguous()
    flat = x.reshape(-1, *rest_shape)
    lin = lin.reshape(-1)
    if accumulate:
        res = _index_add(flat, 0, lin, v, 1)
    else:
        shape = list(flat.shape)
        shape[0] = lin.numel()
        wide = _wide(self.dtype)
        base = flat if wide == self.dtype else cast_into(flat, new_empty(flat.shape, wide, flat))
        vv = v.contiguous() if v.dtype == wide else cast_into(v, new_empty(v.shape, wide, v))
        res = new_empty(flat.shape, wide, flat)
        launch_scatter("set", operand(base), operand(vv), _expanded_index(lin, tuple(shape), 0), operand(res),
                       0)
        if wide != self.dtype:
            res = cast_into(res, new_empty(flat.shape, self.dtype, flat))
    inverse = [perm.index(d) for d in range(self.dim())]
    return res.reshape(x.shape).permute(inverse)


@register("index_put")
def index_put(self, indices, values, accumulate=False):
    """torch.index_put (one index tensor)."""
    return _index_put(self, indices, values, accumulate)


@register("index_put_", "_index_put_impl_")
def index_put_inplace(self, indices, values, accumulate=False, unsafe=False):
    """Tensor.index_put_ / x[idx] = v (one index tensor)."""
    return self.copy_(_index_put(self, indices, values, accumulate))


@register("index_fill.int_Scalar", "index_fill.int_Tensor")
def index_fill(self, dim, index, value):
    """torch.index_fill."""
    x = self if self.dim() else self.reshape(1)
    d = dim % x.dim()
    v = value.item() if isinstance(value, torch.Tensor) else value
    shape = list(x.shape)
    shape[d] = index.numel()
    vals = torch.full(shape, v, dtype=self.dtype, device=self.device)
    return _index_put(x, [None] * d + [index.reshape(-1)], vals, False).reshape(self.shape)


@register("index_fill_.int_Scalar", "index_fill_.int_Tensor")
def index_fill_inplace(self, dim, index, value):
    """Tensor.index_fill_."""
    return self.copy_(index_fill(self, dim, index, value))


@register("index_copy")
def index_copy(self, dim, index, source):
    """torch.index_copy."""
    x = self if self.dim() else self.reshape(1)
    d = dim % x.dim()
    src = source if source.dim() else source.reshape(1)
    return _index_put(x, [None] * d + [index.reshape(-1)], src, False).reshape(self.shape)


@register("index_copy_")
def index_copy_inplace(self, dim, index, source):
    """Tensor.index_copy_."""
    return self.copy_(index_copy(self, dim, index, source))
