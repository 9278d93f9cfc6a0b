"""Grouped matrix-vector products (sibling linears reading the same input as one dispatch) against a
torch CPU reference: dense f32/f16 streaming forms, and the quantized family's int4 / int8 forms."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from torch_webgpu.kernels.matmul import (
    GroupedGemvProblem,
    Layout,
    MatmulProblem,
    grouped_variants,
    plan_grouped_matmul,
)
from torch_webgpu.kernels.quant_matmul import (
    GroupedQuantProblem,
    QuantMatmulProblem,
    QuantWeight,
    grouped_quant_variants,
    pack_bytes,
    pack_scales,
    pack_weight,
    plan_grouped_quant_matmul,
)

from .conftest import with_limits
from .helpers import TORCH, run_launch


def _dense(m, ns, k, dtype, activations, alphas, gen):
    """Problems, weights and the reference of sibling linears y_i = act_i(alpha_i * x @ W_i^T), written
    one after another (4-element aligned) into one output buffer."""
    a = torch.randn(m, k, generator=gen).to(TORCH[dtype])
    ws = [torch.randn(n, k, generator=gen).to(TORCH[dtype]) for n in ns]
    problems, refs, offset = [], [], 0
    for n, w, act, alpha in zip(ns, ws, activations, alphas, strict=True):
        problems.append(MatmulProblem(1, m, n, k, Layout(0, 0, k, 1), Layout(0, 0, 1, k),
                                      Layout(offset, 0, n, 1), dtype, activation=act, alpha=alpha))
        ref = alpha * (a.float() @ w.float().T)
        refs.append((offset, torch.nn.functional.silu(ref) if act == "silu" else ref))
        offset += -(-m * n // 8) * 8
    return GroupedGemvProblem(tuple(problems)), a, ws, refs, offset


def _glu(refs):
    """The GLU form's one result (at the first output): the first product times the second."""
    (offset, gate), (_, up) = refs
    return [(offset, gate * up)]


def run_dense(rt, caps, m, ns, k, dtype, variant=None, activations=None, alphas=None, seed=0, glu=False):
    gen = torch.Generator().manual_seed(seed)
    activations = activations or [None] * len(ns)
    alphas = alphas or [1.0] * len(ns)
    gp, a, ws, refs, total = _dense(m, ns, k, dtype, activations, alphas, gen)
    if glu:
        gp, refs, ns = dataclasses.replace(gp, glu=True), _glu(refs), ns[:1]
    out = torch.full((total,), float("nan"), dtype=TORCH[dtype])
    launch = plan_grouped_matmul(gp, caps, variant)
    assert launch.bindings.count("out") == 1 and len(launch.bindings) == len(ws) + 3
    got = run_launch(rt, launch, {"a": a, **{f"b{i}": w for i, w in enumerate(ws)}}, out)
    tol = dict(atol=1e-4, rtol=1e-4) if dtype == "f32" else dict(atol=2e-2, rtol=1e-2)
    for (offset, ref), n in zip(refs, ns, strict=True):
        torch.testing.assert_close(got[offset:offset + m * n].view(m, n).float(), ref, **tol)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("m", [1, 3])
def test_dense_qkv_shapes(rt, caps, dtype, m):
    """q/k/v-shaped: three products of different N (one not a multiple of the columns per workgroup)."""
    if dtype == "f16" and not caps.shader_f16:
        pytest.skip("the adapter has no shader-f16")
    run_dense(rt, caps, m, [64, 32, 37], 64, dtype)


def test_dense_every_variant(rt, caps):
    """Every streaming form (16-byte and scalar loads) with per-problem activation and alpha."""
    gp, *_ = _dense(1, [48, 40], 128, "f32", [None, None], [1.0, 1.0], torch.Generator())
    names = grouped_variants(gp, caps)
    assert any(n.endswith(".v4") for n in names) and any(not n.endswith(".v4") for n in names)
    for name in names:
        run_dense(rt, caps, 1, [48, 40], 128, "f32", name, activations=["silu", None], alphas=[0.5, 2.0])


def test_dense_subgroup_forms(rt, caps):
    if "subgroups" not in caps.features:
        pytest.skip("adapter has no subgroups")
    sg_caps = caps if caps.subgroup_size else dataclasses.replace(caps, subgroup_size=8)  # lavapipe: 8
    gp, *_ = _dense(1, [16, 24], 64, "f32", [None, None], [1.0, 1.0], torch.Generator())
    names = [n for n in grouped_variants(gp, sg_caps) if ".sg" in n]
    assert names
    for name in names:
        run_dense(rt, sg_caps, 2, [16, 24], 64, "f32", name)


def test_grouping_refused_beyond_limits(caps):
    """More bindings than the device's storage buffers per stage, mixed inputs, bias: no variant."""
    gp, *_ = _dense(1, [16, 16, 16], 64, "f32", [None] * 3, [1.0] * 3, torch.Generator())
    assert grouped_variants(gp, caps)
    assert grouped_variants(gp, with_limits(caps, max_storage_buffers_per_shader_stage=4)) == []
    other = dataclasses.replace(gp.problems[1], k=32)
    assert grouped_variants(GroupedGemvProblem((gp.problems[0], other)), caps) == []
    biased = dataclasses.replace(gp.problems[1], bias=Layout(0, 0, 0, 1))
    assert grouped_variants(GroupedGemvProblem((gp.problems[0], biased)), caps) == []
    with pytest.raises(ValueError, match="same A"):
        plan_grouped_matmul(GroupedGemvProblem((gp.problems[0], other)), caps)


def run_quant(rt, caps, m, ns, k, fmt, group, zero, dtype, variant=None, activations=None, seed=0,
              glu=False):
    """Grouped quantized linears against dequantized weights on the CPU."""
    from .test_quant_matmul import as_words, dequantized, quantized

    gen = torch.Generator().manual_seed(seed)
    activations = activations or [None] * len(ns)
    a = torch.randn(m, k, generator=gen).to(TORCH[dtype])
    problems, ops, refs, offset = [], {"a": a}, [], 0
    for i, (n, act) in enumerate(zip(ns, activations, strict=True)):
        q, z, s = quantized(n, k, fmt, group, zero, dtype, gen)
        ops[f"q{i}"] = as_words(pack_weight(q.numpy(), fmt))
        ops[f"scale{i}"] = as_words(pack_scales(s.numpy()))
        if zero:
            ops[f"zero{i}"] = as_words(pack_bytes(z.numpy()))
        problems.append(QuantMatmulProblem(m, n, k, Layout(0, 0, k, 1), Layout(offset, 0, n, 1),
                                           QuantWeight(fmt, group, zero, dtype), dtype, activation=act))
        ref = a.float() @ dequantized(q, z, s, group).T
        refs.append((offset, n, torch.nn.functional.silu(ref) if act == "silu" else ref))
        offset += -(-m * n // 8) * 8
    out = torch.full((offset,), float("nan"), dtype=TORCH[dtype])
    gp = GroupedQuantProblem(tuple(problems), glu=glu)
    if glu:
        refs = [(refs[0][0], refs[0][1], refs[0][2] * refs[1][2])]
    got = run_launch(rt, plan_grouped_quant_matmul(gp, caps, variant), ops, out)
    tol = dict(atol=1e-4, rtol=1e-4) if dtype == "f32" else dict(atol=2e-2, rtol=1e-2)
    for offset, n, ref in refs:
        torch.testing.assert_close(got[offset:offset + m * n].view(m, n).float(), ref, **tol)
    return gp


@pytest.mark.parametrize("fmt,zero", [("i4", True), ("i8", False), ("i8", True)])
@pytest.mark.parametrize("m", [1, 2])
def test_quant_pairs(rt, caps, fmt, zero, m):
    """gate/up-shaped pairs: int4 group-wise with zero points, int8 per-channel (group = K)."""
    group = 32 if zero else 128
    run_quant(rt, caps, m, [40, 24], 128, fmt, group, zero, "f32", activations=["silu", None])


def test_quant_every_variant_and_f16(rt, caps):
    gp = run_quant(rt, caps, 1, [33, 16], 64, "i4", 32, True, "f32")
    for name in grouped_quant_variants(gp, caps):
        run_quant(rt, caps, 1, [33, 16], 64, "i4", 32, True, "f32", variant=name)
    if caps.shader_f16:
        run_quant(rt, caps, 1, [32, 16], 64, "i8", 32, True, "f16")


def test_quant_triple_needs_eleven_bindings(rt, caps):
    """q/k/v with zero points bind 11 storage buffers: only where the device allows that many."""
    wide = with_limits(caps, max_storage_buffers_per_shader_stage=11)
    if caps.limit("max-storage-buffers-per-shader-stage", 8) >= 11:
        run_quant(rt, wide, 1, [32, 16, 16], 64, "i4", 32, True, "f32")
    narrow = with_limits(caps, max_storage_buffers_per_shader_stage=8)
    gp = run_quant(rt, narrow, 1, [32, 16], 64, "i4", 32, True, "f32")   # a pair fits 8
    triple = GroupedQuantProblem(gp.problems + gp.problems[1:])
    assert triple.bindings() == 11 and grouped_quant_variants(triple, narrow) == []
    with pytest.raises(TypeError, match="storage"):
        plan_grouped_quant_matmul(triple, narrow)


@pytest.mark.parametrize("m", [1, 3])
def test_dense_glu(rt, caps, m):
    """The MLP's silu(x Wg^T) * (x Wu^T) as one output, every variant (f16 with the default)."""
    gp, *_ = _dense(1, [40, 40], 64, "f32", ["silu", None], [1.0, 1.0], torch.Generator())
    gp = dataclasses.replace(gp, glu=True)
    for name in grouped_variants(gp, caps):
        run_dense(rt, caps, m, [40, 40], 64, "f32", name, activations=["silu", None], alphas=[0.5, 2.0],
                  glu=True)
    if caps.shader_f16:
        run_dense(rt, caps, m, [40, 40], 64, "f16", activations=["silu", None], glu=True)
    with pytest.raises(ValueError, match="GLU"):
        plan_grouped_matmul(dataclasses.replace(gp, problems=(gp.problems[0], gp.problems[0])), caps)


@pytest.mark.parametrize("fmt,zero", [("i4", True), ("i8", False)])
def test_quant_glu(rt, caps, fmt, zero):
    group = 32 if zero else 64
    gp = run_quant(rt, caps, 1, [40, 40], 64, fmt, group, zero, "f32", activations=["silu", None], glu=True)
    for name in grouped_quant_variants(gp, caps):
        run_quant(rt, caps, 2, [40, 40], 64, fmt, group, zero, "f32", name, ["silu", None], glu=True)
