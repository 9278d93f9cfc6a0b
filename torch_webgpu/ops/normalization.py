"""Batch norm (train and eval, + backward) and group norm (+ backward), composed from webgpu reductions
(the kernel library's multi-pass reductions) and elementwise kernels; group norm's statistics and
normalisation are one library row kernel (layer_norm over each group). Running statistics are updated
in place on the device."""

from __future__ import annotations

import torch

from .codegen.elementwise import Scalar
from .elementwise import run_formula
from .registry import register
from .tensor_buffers import new_empty


def _shape(x: torch.Tensor) -> list[int]:
    return [1, x.shape[1]] + [1] * (x.dim() - 2)


def _dims(x: torch.Tensor) -> list[int]:
    return [0] + list(range(2, x.dim()))


def _batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):  # noqa: A002
    if not input.dtype.is_floating_point:
        raise TypeError(f"webgpu: batch_norm needs a floating point input, got {input.dtype}")
    if not training:
        return _batch_norm_eval(input, weight, bias, running_mean, running_var, eps)
    x = input.float() if input.dtype != torch.float32 else input
    shape = _shape(x)
    dims = _dims(x)
    n = x.numel() // x.shape[1]
    mean = x.mean(dims)
    var = x.var(dims, correction=0)
    invstd = torch.rsqrt(var + eps)
    if running_mean is not None:
        running_mean.mul_(1 - momentum).add_(mean.to(running_mean.dtype), alpha=momentum)
    if running_var is not None:
        unbiased = var * (n / (n - 1)) if n > 1 else var
        running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype), alpha=momentum)
    y = (x - mean.reshape(shape)) * invstd.reshape(shape)
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    # the CPU returns the saved statistics in the input's dtype
    return y.to(input.dtype), mean.to(input.dtype), invstd.to(input.dtype)


def _batch_norm_eval(input, weight, bias, running_mean, running_var, eps):  # noqa: A002
    """Eval-mode batch norm as one elementwise kernel over the running statistics (no temporaries, so a
    repeated call replays one dispatch; composed from rsqrt/sub/mul/add it took six)."""
    if running_mean is None or running_var is None:
        raise RuntimeError("webgpu: batch_norm in eval mode (training=False) needs running_mean and "
                           "running_var; pass them or use training=True")
    shape = _shape(input)
    values, names = [input, running_mean.reshape(shape), running_var.reshape(shape)], ["a", "b", "c"]
    expr = "(a - b) * inverseSqrt(c + eps)"
    for t, name, op in ((weight, "d", "*"), (bias, "e", "+")):
        if t is not None:
            values.append(t.reshape(shape))
            names.append(name)
            expr = f"{expr} {op} {name}"
    y = new_empty(tuple(input.shape), input.dtype, input)
    run_formula("batch_norm", expr, "f32", input.shape, values, names, [Scalar("eps", "f32", float(eps))], y)
    def no_stats():  # eval saves no statistics
        return torch.empty(0, device=input.device, dtype=input.dtype)

    return y, no_stats(), no_stats()


@register("native_batch_norm")
def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):  # noqa: A002
    """aten.native_batch_norm -> (out, save_mean, save_invstd)."""
    return _batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps)


@register("_native_batch_norm_legit")
def batch_norm_legit(input, weight, bias, running_mean, running_var, training, momentum, eps):  # noqa: A002
    """aten._native_batch_norm_legit (running stats updated in place)."""
    return _batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps)


@register("_native_batch_norm_legit.no_stats")
def batch_norm_legit_no_stats(input, weight, bias, training, momentum, eps):  # noqa: A002
    """aten._native_batch_norm_legit.no_stats."""
    return _batch_norm(input, weight, bias, None, None, True, momentum, eps)


@register("_native_batch_norm_legit_no_training")
def batch_norm_legit_no_training(input, weight, bias, running_mean, running_var, momentum, eps):  # noqa: A002
    """aten._native_batch_norm_legit_no_training (eval mode)."""
    return _batch_norm(input, weight, bias, running_mean, running_var, False, momentum, eps)


@register("native_batch_norm_backward")
def native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean,  # noqa: A002
                               save_invstd, train, eps, output_mask):
    """aten.native_batch_norm_backward -> (grad_input, grad_weight, grad_bias)."""
    shape, dims = _shape(input), _dims(input)
    x, g = input.float(), grad_out.float()
    if train:
        mean, invstd = save_mean.float(), save_invstd.float()
    else:
        mean, invstd = running_mean.float(), torch.rsqrt(running_var.float() + eps)
    xhat = (x - mean.reshape(shape)) * invstd.reshape(shape)
    gi = gw = gb = None
    if output_mask[0]:
        w = weight.float().reshape(shape) if weight is not None else 1.0
        if train:
            mg = g.mean(dims, keepdim=True)
            mgx = (g * xhat).mean(dims, keepdim=True)
            gi = (g - mg - xhat * mgx) * invstd.reshape(shape) * w
        else:
            gi = g * invstd.reshape(shape) * w
        gi = gi.to(input.dtype)
    if output_mask[1]:
        gw = (g * xhat).sum(dims).to(weight.dtype if weight is not None else input.dtype)
    if output_mask[2]:
        gb = g.sum(dims).to(weight.dtype if weight is not None else input.dtype)
    return gi, gw, gb


@register("native_group_norm")
def native_group_norm(input, weight, bias, N, C, HxW, group, eps):  # noqa: A002, N803
    """aten.native_group_norm -> (out, mean [N, G], rstd [N, G])."""
    from .nn import library_rows  # nn imports the conv kernels; group norm needs only its row helper

    rows, n = N * group, (C // group) * HxW
    stats = torch.empty((2, rows), dtype=torch.float32, device=input.device)
    if rows and n:
        y = library_rows("layer_norm", input.contiguous().reshape(rows, n), eps=float(eps), stats=stats)
    else:
        y = torch.empty((rows, n), dtype=torch.float32, device=input.device)
        stats.fill_(float("nan"))
    y = y.reshape(input.shape)
    mean, rstd = stats[0].reshape(N, group), stats[1].reshape(N, group)
    shape = _shape(input)
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y.to(input.dtype), mean.to(input.dtype), rstd.to(input.dtype)


@register("native_group_norm_backward")
def native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW, group, output_mask):  # noqa: A002, N803
    """aten.native_group_norm_backward -> (grad_input, grad_weight, grad_bias)."""
    shape = _shape(input)
    x = input.float().reshape(N, group, (C // group) * HxW)
    xhat = ((x - mean.float().unsqueeze(-1)) * rstd.float().unsqueeze(-1)).reshape(input.shape)
    g = grad_out.float()
    gi = gw = gb = None
    if output_mask[0]:
        gw_ = g * weight.float().reshape(shape) if weight is not None else g
        gw3 = gw_.reshape(N, group, (C // group) * HxW)
        xh3 = xhat.reshape(N, group, (C // group) * HxW)
        mg = gw3.mean(-1, keepdim=True)
        mgx = (gw3 * xh3).mean(-1, keepdim=True)
        gi = ((gw3 - mg - xh3 * mgx) * rstd.float().unsqueeze(-1)).reshape(input.shape).to(input.dtype)
    dims = _dims(input)
    if output_mask[1] and weight is not None:
        gw = (g * xhat).sum(dims).to(weight.dtype)
    if output_mask[2] and weight is not None:
        gb = g.sum(dims).to(weight.dtype)
    return gi, gw, gb
