"""The quantized-table embedding kernel against a torch CPU reference: int8 and packed int4 tables,
per-group and per-row scales (f32 / f16), with and without zero points, f32 and f16 outputs, int32 and
int64 ids (out-of-range ones clamped), and the errors of what it cannot run."""

from __future__ import annotations

import pytest
import torch

from torch_webgpu.kernels.quant_embedding import QuantEmbeddingProblem, plan_quant_embedding
from torch_webgpu.kernels.quant_matmul import QuantWeight, pack_bytes, pack_scales, pack_weight

from .helpers import TORCH, run_launch
from .test_quant_matmul import as_words, dequantized, quantized


def run(rt, caps, fmt, group, zero, scale_dtype, dtype, ids, rows=40, dim=64, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q, z, s = quantized(rows, dim, fmt, group, zero, scale_dtype, gen)
    p = QuantEmbeddingProblem(rows, dim, ids.numel(), QuantWeight(fmt, group, zero, scale_dtype), dtype,
                              ids_words=ids.element_size() // 4)
    ops = {"ids": ids, "q": as_words(pack_weight(q.numpy(), fmt)), "scale": as_words(pack_scales(s.numpy()))}
    if zero:
        ops["zero"] = as_words(pack_bytes(z.numpy()))
    out = torch.full((ids.numel(), dim), float("nan"), dtype=TORCH[dtype])
    got = run_launch(rt, plan_quant_embedding(p, caps), ops, out)
    want = dequantized(q, z, s, group)[ids.long().clamp(0, rows - 1).reshape(-1)].to(TORCH[dtype])
    torch.testing.assert_close(got, want, atol=0, rtol=0)


@pytest.mark.parametrize("zero", [True, False])
@pytest.mark.parametrize("group", [32, 64])
@pytest.mark.parametrize("fmt", ["i8", "i4"])
def test_formats_groups_and_zero_points(rt, caps, fmt, group, zero):
    run(rt, caps, fmt, group, zero, "f32", "f32", torch.tensor([0, 39, 7, 7, 12], dtype=torch.int32))


@pytest.mark.parametrize("fmt", ["i8", "i4"])
def test_f16_output_and_scales(rt, caps, fmt):
    if not caps.shader_f16:
        pytest.skip("the adapter lacks shader-f16")
    run(rt, caps, fmt, 32, True, "f16", "f16", torch.tensor([3, 1, 4, 1, 5, 9, 2], dtype=torch.int32))
    run(rt, caps, fmt, 64, False, "f32", "f16", torch.tensor([38, 0], dtype=torch.int32))


def test_int64_ids_and_clamping(rt, caps):
    run(rt, caps, "i4", 32, True, "f32", "f32", torch.tensor([5, -3, 1000, 39], dtype=torch.int64))


def test_bad_problems_raise(caps):
    weight = QuantWeight("i4", 32, True, "f32")
    with pytest.raises(ValueError, match="multiples of 8"):
        plan_quant_embedding(QuantEmbeddingProblem(10, 36, 2, QuantWeight("i8", 36, False)), caps)
    with pytest.raises(ValueError, match="weight format"):
        plan_quant_embedding(QuantEmbeddingProblem(10, 64, 2, QuantWeight("i2", 32, False)), caps)
    with pytest.raises(TypeError, match="f32 or f16"):
        plan_quant_embedding(QuantEmbeddingProblem(10, 64, 2, weight, "bf16"), caps)
    with pytest.raises(ValueError, match="int64"):
        plan_quant_embedding(QuantEmbeddingProblem(10, 64, 2, weight, ids_words=3), caps)
    with pytest.raises(ValueError, match="needs rows and ids"):
        plan_quant_embedding(QuantEmbeddingProblem(10, 64, 0, weight), caps)
