"""Aten kernels for neural-network ops: softmax/log_softmax (+backward), layer norm (+backward), losses
(mse, nll), embedding (+backward), dropout. Row ops run on the kernel library's rows family
(kernels/rows.py; its strided variant where rows are not unit-stride); the rest compose webgpu ops."""

from __future__ import annotations

import torch

from ..kernels.rows import FAMILY, STRIDED_FAMILY, RowProblem, StridedRowProblem, View
from ..runtime import get_runtime
from ..runtime.capture import unreplayable
from . import conv, pooling  # noqa: F401  (register convolution and pooling kernels)
from .codegen.dtypes import INT64_INDEX_LOAD, convert, dtype_info, storage_name
from .codegen.elementwise import grid
from .codegen.operand import pack_u32
from .elementwise import operand
from .library_launch import run_family
from .losses import reduce_loss
from .out_args import write_out
from .reductions import cast_into
from .registry import register
from .tensor_buffers import buffer_id, new_empty

_ROW_DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}


def library_rows(op: str, x2: torch.Tensor, weight: torch.Tensor | None = None,
                 bias: torch.Tensor | None = None, eps: float = 0.0, stats: torch.Tensor | None = None,
                 grad: torch.Tensor | None = None) -> torch.Tensor:
    """Row op `op` of the 2-D x2 [rows, n] (unit stride along rows; backwards: `grad` likewise, same
    dtype) through kernels/rows.py -> f32."""
    rows, n = x2.shape
    y = new_empty((rows, n), torch.float32, x2)

    def dense(t):
        return t if t.is_contiguous() and t.storage_offset() == 0 else t.clone()

    w = dense(weight.to(x2.dtype)) if weight is not None else None
    b = dense(bias.to(x2.dtype)) if bias is not None else None
    problem = RowProblem(op, _ROW_DTYPES[x2.dtype], rows, n, x2.storage_offset(),
                         x2.stride(0) if rows > 1 else n, float(eps), w is not None, b is not None,
                         stats is not None, grad.storage_offset() if grad is not None else 0,
                         grad.stride(0) if grad is not None and rows > 1 else n)
    operands = {"x": buffer_id(x2), "out": buffer_id(y)}
    for role, t in (("weight", w), ("bias", b), ("stats", stats), ("grad", grad)):
        if t is not None:
            operands[role] = buffer_id(t)
    run_family(FAMILY, problem, operands, x2)
    return y


def _rows(kind: str, x: torch.Tensor, dim: int, result_dtype: torch.dtype, g: torch.Tensor | None = None,
          out: torch.Tensor | None = None) -> torch.Tensor:
    dtype_info(x.dtype, kind)
    if not x.dtype.is_floating_point:
        raise TypeError(f"webgpu: '{kind}' needs a floating point input, got {x.dtype}")
    nd = x.dim()
    xv = x if nd else x.reshape(1)
    gv = None if g is None else (g if nd else g.reshape(1))
    dim = dim % max(nd, 1)
    last = dim == xv.dim() - 1 and xv.dtype in _ROW_DTYPES and _unit_rows(xv)
    if last and (gv is None or (gv.dtype == xv.dtype and gv.shape == xv.shape and _unit_rows(gv))):
        # rows along the last, unit-stride dim: the kernel library (vec4, rows in registers)
        n = xv.shape[-1]
        tmp = library_rows(kind, xv.reshape(-1, n), grad=gv.reshape(-1, n) if gv is not None else None)
    else:
        tmp = new_empty(xv.shape, torch.float32, x)
        problem = StridedRowProblem(kind, storage_name(xv.dtype), tuple(xv.shape), dim, _view(xv), _view(tmp),
                                    _view(gv) if gv is not None else None,
                                    storage_name(gv.dtype) if gv is not None else None)
        operands = {"x": buffer_id(xv), "out": buffer_id(tmp)}
        if gv is not None:
            operands["grad"] = buffer_id(gv)
        run_family(STRIDED_FAMILY, problem, operands, x, tune=False)
    tmp = tmp.reshape(x.shape)
    if out is None:
        if result_dtype == torch.float32:
            return tmp
        out = new_empty(x.shape, result_dtype, x)
    elif out.shape != x.shape:
        out.resize_(x.shape)
    return cast_into(tmp, out)


def _view(t: torch.Tensor) -> View:
    return View(t.storage_offset(), tuple(t.stride()))


def _unit_rows(t: torch.Tensor) -> bool:
    """t's rows (last dim) are unit-stride and equally spaced, so t views as [rows, n] without a copy."""
    if t.numel() == 0 or t.stride(-1) != 1 and t.shape[-1] != 1:
        return False
    try:
        t.view(-1, t.shape[-1])
    except RuntimeError:
        return False
    return True


def _forward_rows(kind: str):
    def op(self, dim, half_to_float, out=None):
        """aten._softmax / _log_softmax (and .out): rows of `self` along dim."""
        return _rows(kind, self, dim, torch.float32 if half_to_float else self.dtype, out=out)
    return op


def _backward_rows(kind: str):
    def op(grad_output, output, dim, input_dtype, out=None, grad_input=None):
        """aten._softmax_backward_data / _log_softmax_backward_data (and .out; x = output, g = grad)."""
        return _rows(kind, output, dim, input_dtype, g=grad_output, out=grad_input if out is None else out)
    return op


# the functional and .out overloads share one kernel per row op (.out's keyword: out or grad_input)
for _kind, _name in (("softmax", "_softmax"), ("log_softmax", "_log_softmax")):
    register(_name, f"{_name}.out")(_forward_rows(_kind))
for _kind, _name in (("softmax_backward", "_softmax_backward_data"),
                     ("log_softmax_backward", "_log_softmax_backward_data")):
    register(_name, f"{_name}.out")(_backward_rows(_kind))


# ---- layer norm --------------------------------------------------------------------------------------


@register("native_layer_norm")
def native_layer_norm(input, normalized_shape, weight, bias, eps):  # noqa: A002
    """aten.native_layer_norm -> (out, mean, rstd)."""
    k = len(normalized_shape)
    if tuple(input.shape[input.dim() - k:]) != tuple(normalized_shape):
        raise RuntimeError(f"Given normalized_shape={list(normalized_shape)}, expected input with shape "
                           f"[*, {', '.join(map(str, normalized_shape))}], but got input of size"
                           f"{list(input.shape)}")
    if not input.dtype.is_floating_point:
        raise TypeError(f"webgpu: layer_norm needs a floating point input, got {input.dtype}")
    lead = tuple(input.shape[: input.dim() - k])
    rows = 1
    for s in lead:
        rows *= s
    n = 1
    for s in normalized_shape:
        n *= s
    x2 = input.contiguous().reshape(rows, n)
    stats = new_empty((2, rows), torch.float32, input)  # mean, rstd: each a contiguous view
    fused = input.dtype in _ROW_DTYPES and all(
        t is None or (t.dtype == input.dtype and t.shape == tuple(normalized_shape)) for t in (weight, bias))
    if rows and n:
        y = library_rows("layer_norm", x2, weight if fused else None, bias if fused else None, eps, stats)
    else:
        y = new_empty((rows, n), torch.float32, input)
        if rows:
            stats.fill_(float("nan"))
    y = y.reshape(input.shape)
    if weight is not None and not fused:
        y = y * weight
    if bias is not None and not fused:
        y = y + bias
    stat_shape = lead + (1,) * k
    mean = stats[0].reshape(stat_shape)
    rstd = stats[1].reshape(stat_shape)
    if input.dtype != torch.float32:
        y = y.to(input.dtype)
        mean = mean.to(input.dtype)
        rstd = rstd.to(input.dtype)
    return y, mean, rstd


@register("native_layer_norm_backward")
def native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias,  # noqa: A002
                               output_mask):
    """aten.native_layer_norm_backward -> (grad_input, grad_weight, grad_bias)."""
    k = len(normalized_shape)
    axes = list(range(input.dim() - k, input.dim()))
    lead_axes = list(range(input.dim() - k))
    xhat = (input - mean) * rstd
    gi = gw = gb = None
    if output_mask[0]:
        g = grad_out * weight if weight is not None else grad_out
        n = 1
        for s in normalized_shape:
            n *= s
        if n:
            mg = g.mean(axes, keepdim=True)
            mgx = (g * xhat).mean(axes, keepdim=True)
            gi = (g - mg - xhat * mgx) * rstd
        else:
            gi = torch.zeros_like(input)
    if output_mask[1] and weight is not None:
        gw = (grad_out * xhat).sum(lead_axes) if lead_axes else grad_out * xhat
    if output_mask[2] and bias is not None:
        gb = grad_out.sum(lead_axes) if lead_axes else grad_out.clone()
    return gi, gw, gb


# ---- losses -------------------------------------------------------------------------------------------

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


@register("mse_loss")
def mse_loss(self, target, reduction=1):
    """aten.mse_loss."""
    d = self - target
    return reduce_loss(d * d, reduction)


@register("mse_loss.out")
def mse_loss_out(self, target, reduction=1, *, out):
    """aten.mse_loss.out."""
    r = mse_loss(self, target, reduction)
    return write_out(out, r)


@register("mse_loss_backward")
def mse_loss_backward(grad_output, self, target, reduction):
    """aten.mse_loss_backward."""
    scale = 2.0 / self.numel() if reduction == 1 and self.numel() else 2.0
    shape = torch.broadcast_shapes(self.shape, target.shape)
    return ((self - target) * grad_output * scale).expand(shape).contiguous()


@register("mse_loss_backward.grad_input")
def mse_loss_backward_out(grad_output, self, target, reduction, *, grad_input):
    """aten.mse_loss_backward.grad_input."""
    r = mse_loss_backward(grad_output, self, target, reduction)
    return write_out(grad_input, r)


_NLL = """
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read> X: array<u32>;
@group(0) @binding(2) var<storage, read> T: array<u32>;
@group(0) @binding(3) var<storage, read> W: array<u32>;
@group(0) @binding(4) var<storage, read_write> L: array<f32>;
@group(0) @binding(5) var<storage, read_write> LW: array<f32>;
fn xload(i: u32) -> f32 {{ return {xload}; }}
fn wload(i: u32) -> f32 {{ return {wload}; }}
fn tload(i: u32) -> i32 {{ return {tload}; }}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  // P = [N*S, C, S, x_off, x_sn, x_sc, x_ss, t_off, t_sn, t_ss, w_off, w_s, has_w, ignore_index, bad]
  let i = gid.x + gid.y * nwg.x * 64u;
  if (i >= P[0]) {{ return; }}
  let n = i / P[2]; let s = i % P[2];
  let t = tload(P[7] + n * P[8] + s * P[9]);
  let ignore = bitcast<i32>(P[13]);
  if (t == ignore) {{ L[i] = 0.0; LW[i] = 0.0; return; }}
  if (t < 0 || u32(t) >= P[1]) {{ L[i] = bitcast<f32>(0x7fc00000u + 0u * P[0]); LW[i] = L[i]; return; }}
  var w = 1.0;
  if (P[12] != 0u) {{ w = wload(P[10] + u32(t) * P[11]); }}
  L[i] = -w * xload(P[3] + n * P[4] + u32(t) * P[5] + s * P[6]);
  LW[i] = w;
}}
"""


def _nll_terms(self, target, weight, ignore_index):
    """Per-element losses and weights of nll_loss (input [N, C, *] or [C]), as f32 [N, S] tensors."""
    if target.dtype not in (torch.int64, torch.int32, torch.uint8):
        raise RuntimeError(f"expected scalar type Long but found {target.dtype}")
    if self.dim() == 1:
        x3 = self.reshape(1, -1, 1)
        t2 = target.reshape(1, 1)
    else:
        x3 = self.reshape(self.shape[0], self.shape[1], -1)
        t2 = target.reshape(target.shape[0] if target.dim() else 1, -1)
    n, c, s = x3.shape
    if t2.shape != (n, s):
        raise ValueError(f"Expected input batch_size ({n}) to match target batch_size ({t2.shape[0]}).")
    losses = new_empty((n, s), torch.float32, self)
    weights = new_empty((n, s), torch.float32, self)
    if n * s:
        xo, to = operand(x3), operand(t2)
        wt = weight if weight is not None else x3
        wo = operand(wt)
        xi, wi = dtype_info(x3.dtype), dtype_info(wt.dtype)
        tload = INT64_INDEX_LOAD.replace("B[", "T[") if t2.dtype == torch.int64 else \
            convert(dtype_info(t2.dtype).load.replace("B[", "T["), "i32", "i32")
        src = _NLL.format(xload=convert(xi.load.replace("B[", "X["), xi.kind, "f32"),
                          wload=convert(wi.load.replace("B[", "W["), wi.kind, "f32"), tload=tload)
        params = [n * s, c, s, xo.offset, *xo.strides, to.offset, *to.strides, wo.offset,
                  wo.strides[0] if weight is not None else 0, int(weight is not None), ignore_index]
        rt = get_runtime()
        unreplayable()   # launches not yet checked to replay: this call is never a launch plan
        rt.dispatch(rt.kernel(src, label="nll_loss"),
                    [rt.constant(pack_u32(params)), buffer_id(x3), buffer_id(t2), buffer_id(wt),
                     buffer_id(losses), buffer_id(weights)], grid(n * s, 64), label="nll_loss")
    return losses, weights


@register("nll_loss_forward")
def nll_loss_forward(self, target, weight, reduction, ignore_index):
    """aten.nll_loss_forward -> (output, total_weight)."""
    losses, weights = _nll_terms(self, target, weight, ignore_index)
    total = weights.sum()
    if reduction == 0:
        out = losses.reshape(target.shape) if self.dim() > 1 else losses.reshape(())
        return cast_into(out, new_empty(out.shape, self.dtype, self)) if self.dtype != torch.float32 \
            else out, total.to(self.dtype)
    loss = losses.sum()
    if reduction == 1:
        loss = loss / total
    return loss.to(self.dtype), total.to(self.dtype)


@register("nll_loss2d_forward")
def nll_loss2d_forward(self, target, weight, reduction, ignore_index):
    """aten.nll_loss2d_forward (same kernel as nll_loss)."""
    return nll_loss_forward(self, target, weight, reduction, ignore_index)


def _onehot_scatter(self, target, values: torch.Tensor) -> torch.Tensor:
    """grad[n, t[n], s] = values[n, s], zero elsewhere (input-shaped)."""
    c = self.shape[1] if self.dim() > 1 else self.shape[0]
    classes = torch.arange(c, device=self.device, dtype=torch.int32)
    shape = [1] * max(self.dim(), 1)
    if self.dim() > 1:
        shape[1] = c
    else:
        shape[0] = c
    classes = classes.reshape(shape)
    t = target.to(torch.int32)
    t = t.unsqueeze(1) if self.dim() > 1 else t.reshape(1)
    v = values.unsqueeze(1) if self.dim() > 1 else values.reshape(1)
    return torch.where(t == classes, v, torch.zeros((), device=self.device, dtype=v.dtype))


@register("nll_loss_backward")
def nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight):
    """aten.nll_loss_backward."""
    _, weights = _nll_terms(self, target, weight, ignore_index)
    w = weights.reshape(target.shape) if self.dim() > 1 else weights.reshape(())
    if reduction == 0:
        g = -w * grad_output
    elif reduction == 1:
        g = -w * (grad_output / total_weight)
    else:
        g = -w * grad_output
    return _onehot_scatter(self, target, g).to(self.dtype)


@register("nll_loss2d_backward")
def nll_loss2d_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight):
    """aten.nll_loss2d_backward."""
    return nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight)


# ---- dropout -----------------------------------------------------------------------------------------


@register("native_dropout")
def native_dropout(input, p, train):  # noqa: A002
    """aten.native_dropout -> (output, mask) with the device RNG."""
    if not train or p == 0:
        return input.clone(), torch.ones_like(input, dtype=torch.bool)
    if p >= 1:
        return torch.zeros_like(input), torch.zeros_like(input, dtype=torch.bool)
    mask = torch.rand_like(input, dtype=torch.float32) >= p
    return input * mask * (1.0 / (1.0 - p)), mask


@register("native_dropout_backward")
def native_dropout_backward(grad_output, mask, scale):
    """aten.native_dropout_backward."""
    return grad_output * mask * scale


# ---- glu, prelu, cross ---------------------------------------------------------------------------------


@register("glu")
def glu(self, dim=-1):
    """torch.nn.functional.glu: a * sigmoid(b) of the two halves along dim."""
    n = self.shape[dim]
    if n % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {dim % self.dim()} is size {n}")
    a, b = self.narrow(dim, 0, n // 2), self.narrow(dim, n // 2, n // 2)
    return a * torch.sigmoid(b)


@register("glu.out")
def glu_out(self, dim=-1, *, out):
    """glu(out=)."""
    r = glu(self, dim)
    return write_out(out, r)


@register("glu_backward")
def glu_backward(grad_output, self, dim):
    """aten.glu_backward."""
    n = self.shape[dim]
    a, b = self.narrow(dim, 0, n // 2), self.narrow(dim, n // 2, n // 2)
    sb = torch.sigmoid(b)
    return torch.cat([grad_output * sb, grad_output * a * sb * (1 - sb)], dim)


def _channel_shape(self: torch.Tensor, weight: torch.Tensor) -> list[int]:
    shape = [1] * self.dim()
    if self.dim() >= 2 and weight.numel() > 1:
        shape[1] = weight.numel()
    return shape


@register("_prelu_kernel")
def prelu(self, weight):
    """aten._prelu_kernel: x if x > 0 else w * x (w per channel)."""
    w = weight.reshape(_channel_shape(self, weight)) if weight.numel() > 1 else weight.reshape(())
    return torch.where(self > 0, self, w * self)


@register("_prelu_kernel_backward")
def prelu_backward(grad_output, self, weight):
    """aten._prelu_kernel_backward -> (grad_input, grad_weight)."""
    w = weight.reshape(_channel_shape(self, weight)) if weight.numel() > 1 else weight.reshape(())
    pos = self > 0
    gi = torch.where(pos, grad_output, w * grad_output)
    gw_full = torch.where(pos, torch.zeros_like(self), self * grad_output)
    if weight.numel() > 1:
        dims = [d for d in range(self.dim()) if d != 1]
        gw = gw_full.sum(dims).reshape(weight.shape)
    else:
        gw = gw_full.sum().reshape(weight.shape)
    return gi, gw


@register("linalg_cross")
def linalg_cross(self, other, *, dim=-1):
    """torch.linalg.cross (3-vectors along dim)."""
    shape = torch.broadcast_shapes(self.shape, other.shape)
    a, b = self.expand(shape), other.expand(shape)
    if shape[dim] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got {shape[dim]}")

    def c(t, i):
        return t.narrow(dim, i, 1)

    return torch.cat([c(a, 1) * c(b, 2) - c(a, 2) * c(b, 1), c(a, 2) * c(b, 0) - c(a, 0) * c(b, 2),
                      c(a, 0) * c(b, 1) - c(a, 1) * c(b, 0)], dim)


@register("linalg_cross.out")
def linalg_cross_out(self, other, *, dim=-1, out):
    """torch.linalg.cross(out=)."""
    r = linalg_cross(self, other, dim=dim)
    return write_out(out, r)


# ---- rms norm ---------------------------------------------------------------------------------------


@register("_fused_rms_norm")
def fused_rms_norm(input, normalized_shape, weight, eps):  # noqa: A002
    """aten._fused_rms_norm -> (out, rstd): one library row kernel (torch.nn.functional.rms_norm)."""
    k = len(normalized_shape)
    if tuple(input.shape[input.dim() - k:]) != tuple(normalized_shape):
        raise RuntimeError(f"Given normalized_shape={list(normalized_shape)}, expected input with shape "
                           f"[*, {', '.join(map(str, normalized_shape))}], but got input of size"
                           f"{list(input.shape)}")
    if input.dtype not in _ROW_DTYPES:
        raise TypeError(f"webgpu: rms_norm needs a float16/bfloat16/float32 input, got {input.dtype}")
    lead = tuple(input.shape[: input.dim() - k])
    rows, n = 1, 1
    for s in lead:
        rows *= s
    for s in normalized_shape:
        n *= s
    if eps is None:
        eps = torch.finfo(input.dtype).eps
    x2 = input.contiguous().reshape(rows, n)
    stats = new_empty((2, rows), torch.float32, input)  # mean, rstd: each a contiguous view
    fused = weight is None or (weight.dtype == input.dtype and tuple(weight.shape) == tuple(normalized_shape))
    if rows and n:
        y = library_rows("rms_norm", x2, weight if fused else None, None, eps, stats)
    else:
        y = new_empty((rows, n), torch.float32, input)
        stats.fill_(float("nan"))
    y = y.reshape(input.shape)
    if weight is not None and not fused:
        y = y * weight
    rstd = stats[1].reshape(lead + (1,) * k)
    if input.dtype != torch.float32:
        y = y.to(input.dtype)
        rstd = rstd.to(input.dtype)
    return y, rstd


@register("_fused_rms_norm_backward")
def fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight, output_mask):  # noqa: A002
    """aten._fused_rms_norm_backward -> (grad_input, grad_weight), composed of webgpu ops."""
    k = len(normalized_shape)
    axes = list(range(input.dim() - k, input.dim()))
    lead_axes = list(range(input.dim() - k))
    x, g, r = input.float(), grad_out.float(), rstd.float()
    xhat = x * r
    gi = gw = None
    if output_mask[0]:
        gx = g * weight.float() if weight is not None else g
        gi = ((gx - xhat * (gx * xhat).mean(axes, keepdim=True)) * r).to(input.dtype)
    if output_mask[1] and weight is not None:
        gw = ((g * xhat).sum(lead_axes) if lead_axes else g * xhat).to(weight.dtype)
    return gi, gw
