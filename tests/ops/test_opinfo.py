"""PyTorch OpInfo samples (op_db) on the webgpu device against the CPU, with the CPU fallback disabled.

Every claimed op must pass at least 90% of its float32 samples (up to MAX_SAMPLES each); samples the
device cannot run must raise a Python exception (counted as "raised"), never crash. The per-op counts
and the totals are printed at the end of the session (see conftest.pytest_terminal_summary).
Ops with random results (dropout, bernoulli, rand*) are excluded: they cannot be compared to the CPU.
"""

import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db

from .opinfo_runner import RESULTS, opinfo_name, run_op

MAX_SAMPLES = 12
MIN_PASS_RATE = 0.9

CLAIMED = [
    "H", "T", "__radd__", "__rdiv__", "__rmatmul__", "__rmod__", "__rmul__", "__rpow__", "__rsub__",
    "_chunk_cat", "_softmax_backward_data", "abs", "acos", "acosh", "add", "addcdiv", "addcmul", "addmm",
    "addmm.decomposed", "addmv", "addr", "alias_copy", "amax", "amin", "argmax", "argmin", "as_strided",
    "as_strided_copy", "as_strided_scatter", "asin", "asinh", "atan", "atan2", "atanh", "atleast_1d",
    "atleast_2d", "atleast_3d", "baddbmm", "bfloat16", "block_diag", "bmm", "bmm.triton_optimized", "bool",
    "broadcast_shapes", "broadcast_tensors", "broadcast_to", "byte", "cartesian_prod", "cat", "ceil",
    "char", "chunk", "clamp", "clamp_max", "clamp_min", "clone", "column_stack", "conj", "conj_physical",
    "constant_pad_nd", "contiguous", "copysign", "cos", "cosh", "cumprod", "cumsum", "cumulative_trapezoid",
    "deg2rad", "diag", "diag_embed", "diagflat", "diagonal", "diagonal_copy", "diagonal_scatter", "diff",
    "div.floor_rounding", "div.no_rounding_mode", "div.trunc_rounding", "dot", "dsplit", "dstack", "einsum",
    "eq", "erf", "erfc", "erfinv", "exp", "exp2", "expand", "expand_as", "expand_copy", "expm1",
    "fft.fftshift", "fft.ifftshift", "fill", "flatten", "flip", "fliplr", "flipud", "float", "floor",
    "floor_divide", "fmax", "fmin", "fmod", "frac", "ge", "gradient", "gt", "half", "heaviside", "hsplit",
    "hstack", "hypot", "index_add", "index_select", "inner", "int", "isclose", "isfinite", "isinf", "isnan",
    "isneginf", "isposinf", "isreal", "item", "kron", "ldexp", "le", "lerp", "lgamma", "linalg.diagonal",
    "linalg.multi_dot", "linalg.norm", "linalg.norm.subgradients_at_zero", "linalg.vander",
    "linalg.vector_norm", "log", "log10", "log1p", "log2", "log_softmax", "logaddexp", "logaddexp2",
    "logical_and", "logical_not", "logical_or", "logical_xor", "logit", "logsumexp", "long", "lt", "mH",
    "mT", "masked.amax", "masked.amin", "masked.argmax", "masked.argmin", "masked.cumprod", "masked.cumsum",
    "masked.log_softmax", "masked.logaddexp", "masked.logsumexp", "masked.norm", "masked.prod",
    "masked.softmax", "masked.softmin", "masked.sum", "masked_fill", "matmul", "max.binary",
    "max.reduction_no_dim", "max.reduction_with_dim", "max_pool2d_with_indices_backward", "maximum", "mean",
    "meshgrid.list_of_tensors", "meshgrid.variadic_tensors", "min.binary", "min.reduction_no_dim",
    "min.reduction_with_dim", "minimum", "mm", "movedim", "mul", "mv", "mvlgamma.mvlgamma_p_1",
    "mvlgamma.mvlgamma_p_3", "mvlgamma.mvlgamma_p_5", "nan_to_num", "nansum", "narrow", "narrow_copy",
    "native_group_norm", "native_layer_norm", "ne", "neg", "nn.functional.adaptive_avg_pool1d",
    "nn.functional.adaptive_avg_pool2d", "nn.functional.avg_pool1d", "nn.functional.avg_pool2d",
    "nn.functional.bilinear", "nn.functional.celu", "nn.functional.conv1d", "nn.functional.conv2d",
    "nn.functional.conv_transpose1d", "nn.functional.conv_transpose2d",
    "nn.functional.cosine_embedding_loss", "nn.functional.cosine_similarity", "nn.functional.cross_entropy",
    "nn.functional.elu", "nn.functional.gelu", "nn.functional.group_norm", "nn.functional.hardshrink",
    "nn.functional.hardsigmoid", "nn.functional.hardswish", "nn.functional.hardtanh",
    "nn.functional.hinge_embedding_loss", "nn.functional.kl_div", "nn.functional.l1_loss",
    "nn.functional.layer_norm", "nn.functional.leaky_relu", "nn.functional.linear",
    "nn.functional.linear_cross_entropy", "nn.functional.local_response_norm",
    "nn.functional.margin_ranking_loss", "nn.functional.max_pool1d", "nn.functional.max_pool2d",
    "nn.functional.mish", "nn.functional.mse_loss", "nn.functional.nll_loss", "nn.functional.pad.circular",
    "nn.functional.pad.constant", "nn.functional.pixel_shuffle", "nn.functional.pixel_unshuffle",
    "nn.functional.relu", "nn.functional.relu6", "nn.functional.rms_norm", "nn.functional.selu",
    "nn.functional.silu", "nn.functional.soft_margin_loss", "nn.functional.softmin",
    "nn.functional.softplus", "nn.functional.softshrink", "nn.functional.softsign",
    "nn.functional.tanhshrink", "nn.functional.threshold", "nonzero", "norm", "norm.fro", "norm.inf",
    "outer", "permute", "permute_copy", "positive", "pow", "prod", "rad2deg", "ravel", "real", "reciprocal",
    "remainder", "repeat", "reshape", "reshape_as", "resize_", "resize_as_", "resolve_conj", "resolve_neg",
    "roll", "rot90", "round", "round.decimals_0", "round.decimals_3", "round.decimals_neg_3", "rsqrt",
    "rsub", "scatter_add", "select", "select_scatter", "sgn", "short", "sigmoid", "sign", "signbit", "sin",
    "sinc", "sinh", "slice", "slice_scatter", "softmax", "special.ndtr", "split", "split.list_args",
    "split_with_sizes", "split_with_sizes_copy", "sqrt", "square", "squeeze", "squeeze.multiple",
    "squeeze_copy", "stack", "std", "std.unbiased", "std_mean", "std_mean.unbiased", "sub", "sum",
    "sum_to_size", "t", "t_copy", "tan", "tanh", "tensordot", "tile", "transpose", "transpose_copy",
    "trapezoid", "trapz", "tril", "triu", "true_divide", "trunc", "unbind", "unbind_copy", "unflatten",
    "unfold", "unfold_copy", "unsafe_chunk", "unsafe_split", "unsqueeze", "unsqueeze_copy", "var",
    "var.unbiased", "var_mean", "var_mean.unbiased", "view", "view_as", "view_copy", "vsplit", "vstack",
    "where", "xlogy", "zero_",
]

_OPS = {opinfo_name(op): op for op in op_db}


@pytest.mark.parametrize("name", CLAIMED)
def test_opinfo_float32(webgpu, name):
    op = _OPS[name]
    result = run_op(op, torch.float32, MAX_SAMPLES)
    RESULTS[(name, "float32")] = result
    assert result.total > 0, f"{name}: no float32 sample ran ({result.skipped} skipped by the CPU)"
    rate = result.passed / result.total
    assert rate >= MIN_PASS_RATE, f"{name}: {result.passed}/{result.total} passed; {dict(result.errors)}"
