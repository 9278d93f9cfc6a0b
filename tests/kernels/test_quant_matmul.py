"""The quantized-weight matmul family against a torch CPU reference: int8 and packed int4 weights, per-group
and per-channel scales, with and without zero points, each variant, f32 and f16 activations, epilogues."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from torch_webgpu.kernels.matmul import Layout
from torch_webgpu.kernels.quant_matmul import (
    STREAM,
    QuantMatmulProblem,
    QuantWeight,
    pack_bytes,
    pack_scales,
    pack_weight,
    plan_quant_matmul,
    quant_variants,
)

from .helpers import TORCH, run_launch

LIMITS = {"i8": (-128, 127), "i4": (-8, 7)}


def quantized(n, k, fmt, group, zero, scale_dtype, gen):
    """q [N, K] int8 in the format's range, zero points [N, G] int8 (or None), scales [N, G]."""
    lo, hi = LIMITS[fmt]
    q = torch.randint(lo, hi + 1, (n, k), generator=gen, dtype=torch.int8)
    z = torch.randint(lo, hi + 1, (n, k // group), generator=gen, dtype=torch.int8) if zero else None
    s = (torch.rand(n, k // group, generator=gen) * 0.05 + 0.01).to(TORCH[scale_dtype])
    return q, z, s


def dequantized(q, z, s, group):
    """W = (q - z) * s in f32, repeated along each group."""
    qf = q.float()
    if z is not None:
        qf = qf - z.float().repeat_interleave(group, 1)
    return qf * s.float().repeat_interleave(group, 1)


def as_words(array: np.ndarray) -> torch.Tensor:
    """A numpy array as a torch tensor of its bytes (for upload)."""
    return torch.from_numpy(np.ascontiguousarray(array).view(np.uint8).copy())


def run(rt, caps, m, n, k, fmt, group, zero, dtype, variant=None, bias=False, residual=False,
        activation=None, alpha=1.0, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q, z, s = quantized(n, k, fmt, group, zero, dtype, gen)
    a = torch.randn(m, k, generator=gen).to(TORCH[dtype])
    o = torch.full((m, n), float("nan"), dtype=TORCH[dtype])
    ops = {"a": a, "q": as_words(pack_weight(q.numpy(), fmt)), "scale": as_words(pack_scales(s.numpy()))}
    if zero:
        ops["zero"] = as_words(pack_bytes(z.numpy()))
    bias_t = torch.randn(n, generator=gen).to(TORCH[dtype]) if bias else None
    res_t = torch.randn(m, n, generator=gen).to(TORCH[dtype]) if residual else None
    if bias:
        ops["bias"] = bias_t
    if residual:
        ops["residual"] = res_t
    p = QuantMatmulProblem(m, n, k, Layout(0, 0, k, 1), Layout(0, 0, n, 1),
                           QuantWeight(fmt, group, zero, dtype), dtype,
                           bias=Layout(0, 0, 0, 1) if bias else None,
                           residual=Layout(0, 0, n, 1) if residual else None, activation=activation,
                           alpha=alpha)
    got = run_launch(rt, plan_quant_matmul(p, caps, variant), ops, o)
    ref = alpha * (a.float() @ dequantized(q, z, s, group).T)
    if bias:
        ref = ref + bias_t.float()
    if activation == "relu":
        ref = torch.relu(ref)
    elif activation == "silu":
        ref = torch.nn.functional.silu(ref)
    if residual:
        ref = ref + res_t.float()
    tol = dict(atol=1e-4, rtol=1e-4) if dtype == "f32" else dict(atol=2e-2, rtol=1e-2)
    torch.testing.assert_close(got.float(), ref, **tol)


@pytest.mark.parametrize("fmt", ["i8", "i4"])
@pytest.mark.parametrize("m", [1, 3, 37])
def test_formats_and_shapes(rt, caps, fmt, m):
    run(rt, caps, m, 70, 96, fmt, 32, True, "f32")


@pytest.mark.parametrize("variant", ["gemv.k64n4.wg", "gemv.k32n8.wg", "gemv.k16n16.wg", "tile64x64.r4x4.k16",
                                     "tile32x32.r2x2.k16"])
def test_every_variant(rt, caps, variant):
    run(rt, caps, 2, 33, 128, "i4", 32, True, "f32", variant=variant)


def test_int8_per_channel_without_zero(rt, caps):
    """Int8WeightOnlyConfig: one scale per output channel (group = K), no zero point."""
    run(rt, caps, 1, 48, 64, "i8", 64, False, "f32")
    run(rt, caps, 20, 48, 64, "i8", 64, False, "f32")


def test_group_128_and_epilogue(rt, caps):
    run(rt, caps, 1, 40, 256, "i4", 128, True, "f32", bias=True, activation="silu", residual=True)
    run(rt, caps, 9, 40, 256, "i4", 128, True, "f32", bias=True, activation="relu", alpha=0.5)


@pytest.mark.parametrize("m", [1, 17])
@pytest.mark.parametrize("fmt", ["i8", "i4"])
def test_f16_activations(rt, caps, fmt, m):
    if not caps.shader_f16:
        pytest.skip("the adapter has no shader-f16")
    run(rt, caps, m, 64, 64, fmt, 32, True, "f16", bias=True)


def test_pack_int4_layout():
    """Nibble k % 8 of word k // 8, two's complement, low nibble first."""
    q = np.array([[-8, -1, 0, 1, 7, 2, -3, 5]], np.int8)
    (word,) = pack_weight(q, "i4")[0]
    nibbles = [(int(word) >> (4 * j)) & 0xF for j in range(8)]
    assert [x - 16 if x >= 8 else x for x in nibbles] == q[0].tolist()


def test_bad_problems_raise(caps):
    with pytest.raises(ValueError, match="do not fit i4"):
        pack_weight(np.full((1, 8), 9, np.int8), "i4")
    p = QuantMatmulProblem(1, 8, 20, Layout(0, 0, 20, 1), Layout(0, 0, 8, 1), QuantWeight("i4", 20, True))
    assert quant_variants(p, caps) == []
    with pytest.raises(ValueError, match="multiples of 8"):
        plan_quant_matmul(p, caps)


@pytest.mark.parametrize("variant", [spec.name for spec in STREAM])
def test_streaming_gemv_variants(rt, caps, variant):
    """The 16-byte-load decode forms: odd N, int4 group 32, a tail of loads past the unrolled steps."""
    run(rt, caps, 1, 37, 352, "i4", 32, True, "f32", variant=variant, bias=True)


@pytest.mark.parametrize("case", [(3, 20, 256, "i8", 128, False, "f32"), (1, 24, 256, "i4", 128, True, "f16"),
                                  (2, 16, 64, "i8", 32, True, "f16")], ids=str)
def test_streaming_gemv_shape_classes(rt, caps, case):
    """int8 and int4 with groups of 128, several rows, f16 activations (one variant each)."""
    if case[-1] == "f16" and not caps.shader_f16:
        pytest.skip("the adapter has no shader-f16")
    variant = STREAM[1 if case[3] == "i8" else 2].name
    run(rt, caps, *case, variant=variant, residual=True)


def test_streaming_gemv_subgroup_forms(rt, caps):
    if "subgroups" not in caps.features:
        pytest.skip("adapter has no subgroups")
    sg_caps = caps if caps.subgroup_size else dataclasses.replace(caps, subgroup_size=8)  # lavapipe: 8
    for spec in STREAM:
        variant = dataclasses.replace(spec, subgroup=True).name
        run(rt, sg_caps, 1, 33, 128, "i4", 32, True, "f32", variant=variant)
    run(rt, sg_caps, 2, 20, 64, "i8", 64, False, "f32", variant="gemv.k16n8.u2.sg")


def test_streaming_gemv_offered_only_for_whole_loads(caps):
    """A 16-byte load must not straddle a group or a row: int4 group 16 keeps the split-K forms."""
    def names(k, group, fmt="i4", cpu=True):
        p = QuantMatmulProblem(1, 64, k, Layout(0, 0, k, 1), Layout(0, 0, 64, 1),
                               QuantWeight(fmt, group, True))
        return quant_variants(p, dataclasses.replace(caps, cpu=cpu))
    assert not any(".u2" in v for v in names(96, 16))
    assert any(".u2" in v for v in names(96, 32)) and any(".u2" in v for v in names(48, 16, "i8"))
    assert names(2048, 32)[0] == "gemv.k64n4.wg" and names(2048, 32, cpu=False)[0].startswith("gemv.k")
    assert ".u2" in names(2048, 32, cpu=False)[0]


def test_tensor_core_variant_source(caps):
    """Prefill with f16 activations offers the dense family's tensor-core tiles, W dequantized into a
    column-major f16 tile (the H200 runs them; lavapipe has no subgroup matrices)."""
    tc = dataclasses.replace(caps, features=caps.features | {"shader-f16",
                                                             "chromium-experimental-subgroup-matrix"},
                             subgroup_size=32, subgroup_matrix_configs=(("f16", "f32", 16, 16, 16),),
                             limits=dict(caps.limits) | {"max-compute-workgroup-storage-size": 49152})
    p = QuantMatmulProblem(1024, 2048, 2048, Layout(0, 0, 2048, 1), Layout(0, 0, 2048, 1),
                           QuantWeight("i4", 32, True, "f16"), "f16")
    names = quant_variants(p, tc)
    assert names[0] == "sgmat.w2x2.f4x4.k32" and "tile64x64.r4x4.k16" in names
    launch = plan_quant_matmul(p, tc)
    assert launch.grid == (16, 8, 1) and launch.workgroup_size == (128, 1, 1)
    assert "subgroupMatrixMultiplyAccumulate" in launch.wgsl and "col_major>(&Bs[sn], 0u, 40u)" in launch.wgsl
    # f32 activations, decode rows, or no tensor cores: the SIMT variants only
    f32 = dataclasses.replace(p, dtype="f32", weight=QuantWeight("i4", 32, True, "f32"))
    assert not any(n.startswith("sgmat") for n in quant_variants(f32, tc) + quant_variants(p, caps)
                   + quant_variants(dataclasses.replace(p, m=1), tc))
