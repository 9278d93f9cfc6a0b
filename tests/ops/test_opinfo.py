"""PyTorch OpInfo samples (op_db) on the webgpu device against the CPU, with the CPU fallback disabled.

Every claimed op must pass at least 90% of its samples (float32: up to MAX_SAMPLES each; int32, float16
and bool: the first OTHER_DTYPE_SAMPLES, to keep the suite within its time budget on 2 cores). Samples
the device cannot run must raise a Python exception (counted as "raised"), never crash. Per-op counts and
totals are printed at the end of the session (conftest.pytest_terminal_summary).
Ops with random results (dropout, bernoulli, rand*, normal, ...) are not claimed: they cannot be compared
with the CPU. The lists were produced by running every op_db entry with the fallback off.
"""

import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db

from .opinfo_runner import RESULTS, opinfo_name, run_op

MAX_SAMPLES = 6
OTHER_DTYPE_SAMPLES = 2
MIN_PASS_RATE = 0.9

CLAIMED_FLOAT32 = [
    "H", "T", "__getitem__", "__radd__", "__rdiv__", "__rmatmul__", "__rmod__", "__rmul__", "__rpow__",
    "__rsub__", "_chunk_cat", "_native_batch_norm_legit", "_softmax_backward_data", "abs", "acos", "acosh",
    "add", "addcdiv", "addcmul", "addmm", "addmm.decomposed", "addmv", "addr", "alias_copy", "all",
    "allclose", "amax", "amin", "aminmax", "any", "argmax", "argmin", "argsort", "argwhere", "as_strided",
    "as_strided.partial_views",
    "as_strided_copy", "as_strided_scatter", "asin", "asinh", "atan", "atan2", "atanh", "atleast_1d",
    "atleast_2d", "atleast_3d", "baddbmm", "bfloat16", "block_diag", "bmm", "bmm.triton_optimized", "bool",
    "broadcast_shapes", "broadcast_tensors", "broadcast_to", "bucketize", "byte", "cartesian_prod", "cat",
    "ceil", "char", "chunk", "clamp", "clamp_max", "clamp_min", "clone", "column_stack", "combinations",
    "conj", "conj_physical", "constant_pad_nd", "contiguous", "copysign", "cos", "cosh", "count_nonzero",
    "cross", "cummax", "cummin", "cumprod", "cumsum", "cumulative_trapezoid", "deg2rad", "diag", "diag_embed",
    "diagflat", "diagonal", "diagonal_copy", "diagonal_scatter", "diff", "dist", "div.floor_rounding",
    "div.no_rounding_mode", "div.trunc_rounding", "dot", "dsplit", "dstack", "einsum", "eq", "erf", "erfc",
    "erfinv", "exp", "exp2", "expand", "expand_as", "expand_copy", "expm1", "fft.fftshift", "fft.ifftshift",
    "fill", "flatten", "flip", "fliplr", "flipud", "float", "floor", "floor_divide", "fmax", "fmin", "fmod",
    "frac", "ge", "gradient", "gt", "half", "heaviside", "hsplit", "hstack", "hypot", "index_add",
    "index_copy", "index_fill", "index_put", "index_select", "inner", "int", "isclose", "isfinite", "isin",
    "isinf", "isnan", "isneginf", "isposinf", "isreal", "item", "kron", "kthvalue", "ldexp", "le", "lerp",
    "lgamma", "linalg.cross", "linalg.diagonal", "linalg.multi_dot", "linalg.norm",
    "linalg.norm.subgradients_at_zero", "linalg.vander", "linalg.vecdot", "linalg.vector_norm", "log",
    "log10", "log1p", "log2", "log_softmax", "logaddexp", "logaddexp2", "logcumsumexp", "logical_and",
    "logical_not", "logical_or", "logical_xor", "logit", "logsumexp", "long", "lt", "mH", "mT", "masked.amax",
    "masked.amin", "masked.argmax", "masked.argmin", "masked.cumprod", "masked.cumsum", "masked.log_softmax",
    "masked.logaddexp", "masked.logsumexp", "masked.mean", "masked.norm", "masked.prod", "masked.softmax",
    "masked.softmin", "masked.std", "masked.sum", "masked.var", "masked_fill", "masked_select", "matmul",
    "max.binary", "max.reduction_no_dim", "max.reduction_with_dim", "max_pool2d_with_indices_backward",
    "maximum", "mean", "median", "meshgrid.list_of_tensors", "meshgrid.variadic_tensors", "min.binary",
    "min.reduction_no_dim", "min.reduction_with_dim", "minimum", "mm", "movedim", "msort", "mul", "mv",
    "mvlgamma.mvlgamma_p_1", "mvlgamma.mvlgamma_p_3", "mvlgamma.mvlgamma_p_5", "nan_to_num", "nanmean",
    "nanmedian", "nanquantile", "nansum", "narrow", "narrow_copy", "native_batch_norm", "native_group_norm",
    "native_layer_norm", "ne", "neg", "nn.functional.adaptive_avg_pool1d",
    "nn.functional.adaptive_avg_pool2d", "nn.functional.adaptive_avg_pool3d",
    "nn.functional.adaptive_max_pool1d", "nn.functional.adaptive_max_pool2d",
    "nn.functional.adaptive_max_pool3d", "nn.functional.avg_pool1d", "nn.functional.avg_pool2d",
    "nn.functional.avg_pool3d", "nn.functional.bilinear", "nn.functional.binary_cross_entropy",
    "nn.functional.binary_cross_entropy_with_logits", "nn.functional.celu", "nn.functional.conv1d",
    "nn.functional.conv2d", "nn.functional.conv3d", "nn.functional.conv_transpose1d",
    "nn.functional.conv_transpose2d", "nn.functional.conv_transpose3d", "nn.functional.cosine_embedding_loss",
    "nn.functional.cosine_similarity", "nn.functional.cross_entropy", "nn.functional.elu",
    "nn.functional.embedding", "nn.functional.gaussian_nll_loss", "nn.functional.gelu", "nn.functional.glu",
    "nn.functional.group_norm", "nn.functional.hardshrink", "nn.functional.hardsigmoid",
    "nn.functional.hardswish", "nn.functional.hardtanh", "nn.functional.hinge_embedding_loss",
    "nn.functional.huber_loss", "nn.functional.instance_norm", "nn.functional.interpolate.area",
    "nn.functional.interpolate.bilinear", "nn.functional.interpolate.linear",
    "nn.functional.interpolate.nearest", "nn.functional.interpolate.nearest-exact", "nn.functional.kl_div",
    "nn.functional.l1_loss", "nn.functional.layer_norm", "nn.functional.leaky_relu", "nn.functional.linear",
    "nn.functional.linear_cross_entropy", "nn.functional.linear_cross_entropy.chunked",
    "nn.functional.linear_cross_entropy.chunked_none", "nn.functional.local_response_norm",
    "nn.functional.logsigmoid", "nn.functional.margin_ranking_loss", "nn.functional.max_pool1d",
    "nn.functional.max_pool2d", "nn.functional.max_pool3d", "nn.functional.mish", "nn.functional.mse_loss",
    "nn.functional.multilabel_soft_margin_loss", "nn.functional.nll_loss", "nn.functional.pad.circular",
    "nn.functional.pad.constant", "nn.functional.pad.reflect", "nn.functional.pad.replicate",
    "nn.functional.pad.replicate_negative", "nn.functional.pairwise_distance", "nn.functional.pixel_shuffle",
    "nn.functional.pixel_unshuffle", "nn.functional.prelu", "nn.functional.relu", "nn.functional.relu6",
    "nn.functional.rms_norm", "nn.functional.selu", "nn.functional.silu", "nn.functional.smooth_l1_loss",
    "nn.functional.soft_margin_loss", "nn.functional.softmin", "nn.functional.softplus",
    "nn.functional.softshrink", "nn.functional.softsign", "nn.functional.tanhshrink",
    "nn.functional.threshold", "nn.functional.triplet_margin_loss",
    "nn.functional.triplet_margin_with_distance_loss", "nn.functional.unfold",
    "nn.functional.upsample_bilinear", "nn.functional.upsample_nearest", "nonzero", "norm", "norm.fro",
    "norm.inf", "outer", "permute", "permute_copy", "positive", "pow", "prod", "quantile", "rad2deg", "ravel",
    "real", "reciprocal", "remainder", "repeat", "repeat_interleave", "reshape", "reshape_as", "resize_",
    "resize_as_", "resolve_conj", "resolve_neg", "roll", "rot90", "round", "round.decimals_0",
    "round.decimals_3", "round.decimals_neg_3", "rsqrt", "rsub", "scatter", "scatter_add",
    "scatter_reduce.amax", "scatter_reduce.amin", "scatter_reduce.mean", "scatter_reduce.prod",
    "scatter_reduce.sum", "searchsorted", "select", "select_scatter", "sgn", "short", "sigmoid", "sign",
    "signbit", "sin", "sinc", "sinh", "slice", "slice_scatter", "softmax", "sort", "special.entr",
    "special.ndtr", "special.xlog1py", "split", "split.list_args", "split_with_sizes",
    "split_with_sizes_copy", "sqrt", "square", "squeeze", "squeeze.multiple", "squeeze_copy", "stack", "std",
    "std.unbiased", "std_mean", "std_mean.unbiased", "sub", "sum", "sum_to_size", "t", "t_copy", "take",
    "tan", "tanh", "tensordot", "tile", "topk", "torch.ops.aten._safe_softmax.default", "trace", "transpose",
    "transpose_copy", "trapezoid", "trapz", "tril", "triu", "true_divide", "trunc", "unbind", "unbind_copy",
    "unflatten", "unfold", "unfold_copy", "unique", "unique_consecutive", "unsafe_chunk", "unsafe_split",
    "unsqueeze", "unsqueeze_copy", "var", "var.unbiased", "var_mean", "var_mean.unbiased", "vdot", "view",
    "view_as", "view_copy", "vsplit", "vstack", "where", "xlogy", "zero_",
]
# the other dtypes claim the float32 ops minus those listed (integer math, float-only results, ...)
_NOT_FLOAT16 = {
    "__getitem__", "_native_batch_norm_legit", "addr", "argsort", "broadcast_shapes", "bucketize", "cummax",
    "cummin", "isin", "linalg.vander", "log_softmax", "logit", "masked.log_softmax", "nanquantile",
    "native_batch_norm", "nn.functional.adaptive_avg_pool3d", "nn.functional.adaptive_max_pool1d",
    "nn.functional.adaptive_max_pool2d", "nn.functional.avg_pool3d", "nn.functional.conv_transpose1d",
    "nn.functional.conv_transpose2d", "nn.functional.conv_transpose3d", "nn.functional.embedding",
    "nn.functional.huber_loss", "nn.functional.instance_norm", "nn.functional.interpolate.bilinear",
    "nn.functional.interpolate.linear", "nn.functional.linear_cross_entropy.chunked_none",
    "nn.functional.pad.reflect", "nn.functional.pad.replicate", "nn.functional.pad.replicate_negative",
    "nn.functional.unfold", "nn.functional.upsample_bilinear", "quantile", "repeat_interleave",
    "round.decimals_3", "round.decimals_neg_3", "searchsorted", "sort",
}
# int32: float32's ops but the float-only ones; of nn.functional, only those listed
_NOT_INT32 = {
    "__getitem__", "_native_batch_norm_legit", "_softmax_backward_data", "addcdiv", "all", "allclose", "any",
    "atan2", "bmm.triton_optimized", "broadcast_shapes", "bucketize", "cummax", "cummin", "cumprod", "dist",
    "frac", "hypot", "kthvalue", "lerp", "linalg.multi_dot", "linalg.norm",
    "linalg.norm.subgradients_at_zero", "linalg.vander", "linalg.vecdot", "linalg.vector_norm", "log_softmax",
    "logaddexp", "logaddexp2", "logcumsumexp", "logsumexp", "masked.log_softmax", "masked.logaddexp",
    "masked.logsumexp", "masked.mean", "masked.norm", "masked.softmax", "masked.softmin", "masked.std",
    "masked.var", "max_pool2d_with_indices_backward", "mean", "nanmean", "nanquantile", "nansum",
    "native_batch_norm", "native_group_norm", "native_layer_norm", "norm", "norm.fro", "norm.inf", "quantile",
    "repeat_interleave", "round.decimals_0", "round.decimals_3", "round.decimals_neg_3",
    "scatter_reduce.mean", "searchsorted", "softmax", "std", "std.unbiased", "std_mean", "std_mean.unbiased",
    "tensordot", "topk", "var", "var.unbiased", "var_mean", "var_mean.unbiased", "vdot",
}
_INT32_NN = {
    "nn.functional.cosine_embedding_loss", "nn.functional.hardtanh", "nn.functional.linear",
    "nn.functional.margin_ranking_loss", "nn.functional.pad.circular", "nn.functional.pad.constant",
    "nn.functional.pairwise_distance", "nn.functional.pixel_shuffle", "nn.functional.pixel_unshuffle",
    "nn.functional.relu", "nn.functional.relu6", "nn.functional.softsign", "nn.functional.tanhshrink",
    "nn.functional.threshold", "nn.functional.triplet_margin_loss",
    "nn.functional.triplet_margin_with_distance_loss",
}
# bool: the int32 claims minus arithmetic bool lacks, plus a few bool-only passes
_NOT_BOOL = {
    "__rmatmul__", "__rmod__", "__rpow__", "__rsub__", "abs", "addcmul", "addmm", "addmm.decomposed", "addmv",
    "argmax", "argmin", "argsort", "baddbmm", "bmm", "ceil", "clamp", "cross", "cumulative_trapezoid",
    "div.floor_rounding", "div.trunc_rounding", "dot", "einsum", "floor", "floor_divide", "fmod", "gradient",
    "heaviside", "inner", "isin", "linalg.cross", "masked.amax", "masked.amin", "masked.argmax",
    "masked.argmin", "masked.cumprod", "masked.cumsum", "matmul", "median", "mm", "mv",
    "mvlgamma.mvlgamma_p_1", "mvlgamma.mvlgamma_p_3", "mvlgamma.mvlgamma_p_5", "nanmedian", "neg",
    "nn.functional.hardtanh", "nn.functional.linear", "nn.functional.margin_ranking_loss",
    "nn.functional.pairwise_distance", "nn.functional.relu", "nn.functional.relu6", "nn.functional.softsign",
    "nn.functional.tanhshrink", "nn.functional.threshold", "nn.functional.triplet_margin_loss",
    "nn.functional.triplet_margin_with_distance_loss", "positive", "pow", "remainder", "round", "rsub",
    "sort", "square", "sub", "trace", "trapezoid", "trapz", "trunc",
}
_BOOL_EXTRA = {
    "all", "any", "logsumexp", "nansum",
}
CLAIMED_FLOAT16 = sorted(set(CLAIMED_FLOAT32) - _NOT_FLOAT16)
CLAIMED_INT32 = sorted(n for n in CLAIMED_FLOAT32
                       if (n in _INT32_NN if n.startswith("nn.functional.") else n not in _NOT_INT32))
CLAIMED_BOOL = sorted((set(CLAIMED_INT32) - _NOT_BOOL) | _BOOL_EXTRA)

_OPS = {opinfo_name(op): op for op in op_db}
_CASES = ([(torch.float32, n) for n in CLAIMED_FLOAT32] + [(torch.int32, n) for n in CLAIMED_INT32]
          + [(torch.float16, n) for n in CLAIMED_FLOAT16] + [(torch.bool, n) for n in CLAIMED_BOOL])


@pytest.mark.parametrize(("dtype", "name"), _CASES, ids=[f"{str(d)[6:]}-{n}" for d, n in _CASES])
def test_opinfo(webgpu, dtype, name):
    limit = MAX_SAMPLES if dtype == torch.float32 else OTHER_DTYPE_SAMPLES
    result = run_op(_OPS[name], dtype, limit)
    RESULTS[(name, str(dtype)[6:])] = result
    assert result.total > 0, f"{name}: no {dtype} sample ran ({result.skipped} skipped by the CPU)"
    rate = result.passed / result.total
    assert rate >= MIN_PASS_RATE, (f"{name} {dtype}: {result.passed}/{result.total} passed; "
                                   f"{dict(result.errors)}")
