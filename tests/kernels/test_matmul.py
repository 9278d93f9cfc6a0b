"""Every matmul variant lavapipe can run, shipping and experimental, against torch CPU: odd sizes,
transposed operands, batch strides, each epilogue, f16 storage; the subgroup-matrix variant's WGSL is
generated and checked for its structure (lavapipe has no subgroup matrices; the H200 run validates it)."""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch

from torch_webgpu.kernels.matmul import (
    ACTIVATIONS,
    SPLIT_AFTER,
    VARIANTS,
    VEC_SUFFIX,
    Layout,
    MatmulProblem,
    TiledSpec,
    experimental_offered,
    parse_variant,
    plan_matmul,
    plan_matmul_steps,
    variants,
)

from .conftest import with_limits
from .helpers import TORCH, run_launch, run_plan

pytestmark = pytest.mark.usefixtures("experimental")   # every variant: the experimental ones too

TORCH_ACT = {None: lambda v: v, "relu": torch.relu, "gelu": torch.nn.functional.gelu,
             "gelu_tanh": lambda v: torch.nn.functional.gelu(v, approximate="tanh"),
             "silu": torch.nn.functional.silu, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
             "relu6": torch.nn.functional.relu6}


def lay(t: torch.Tensor) -> Layout:
    """The Layout of a 3-d tensor view."""
    return Layout(t.storage_offset(), t.stride(0), t.stride(1), t.stride(2))


def operands(b, m, n, k, dtype, ta=False, tb=False, sliced=False, gen=None):
    """A [b,m,k], B [b,k,n] (optionally stored transposed, or as a sliced view with batch strides)."""
    t = TORCH[dtype]
    a = torch.randn(b, k, m, generator=gen).to(t).transpose(1, 2) if ta else \
        torch.randn(b, m, k, generator=gen).to(t)
    bb = torch.randn(b, n, k, generator=gen).to(t).transpose(1, 2) if tb else \
        torch.randn(b, k, n, generator=gen).to(t)
    if sliced:  # every other batch of a bigger tensor, offset by one row
        a = torch.randn(2 * b, m + 1, k, generator=gen).to(t)[::2, 1:]
    return a, bb


def check(rt, caps, p, a, bb, variant, bias=None, residual=None, act=None, alpha=1.0, beta=1.0):
    """Run one variant and compare with torch (f32 math on CPU, rounded like the output dtype)."""
    o = torch.full((p.batch, p.m, p.n), float("nan"), dtype=a.dtype)
    p = dataclasses.replace(p, out=lay(o))
    ops = {"a": a, "b": bb}
    if bias is not None:
        ops["bias"] = bias
    if residual is not None:
        ops["residual"] = residual
    got = run_plan(rt, plan_matmul_steps(p, caps, variant), ops, o)
    ref = alpha * (a.float() @ bb.float())
    if bias is not None:
        ref = ref + beta * bias.float()
    ref = TORCH_ACT[act](ref)
    if residual is not None:
        ref = ref + residual.float()
    tol = dict(atol=2e-2, rtol=2e-2) if a.dtype == torch.float16 else dict(atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(got.float(), ref.to(a.dtype).float(), **tol)


def problem(a, bb, dtype, **kw) -> MatmulProblem:
    """The MatmulProblem of A @ B (output layout filled in by check)."""
    b, m, k = a.shape
    n = bb.shape[2]
    return MatmulProblem(b, m, n, k, lay(a), lay(bb), Layout(0, m * n, n, 1), dtype=dtype, **kw)


# (b, m, n, k, a transposed, b transposed): odd sizes, transposed operands, gemv rows, mv columns
CASES = [(1, 33, 47, 29, False, False), (2, 64, 64, 64, False, True), (3, 17, 72, 40, True, False),
         (1, 1, 96, 64, False, True), (2, 3, 40, 33, False, False), (1, 70, 1, 36, False, False),
         (1, 130, 132, 20, True, True)]


def _variant_cases():
    """Each variant on the cases that offer it, one case per variant and dtype (the suite stays fast)."""
    seen: dict[str, int] = {}
    from torch_webgpu.kernels import DeviceCaps
    from torch_webgpu.runtime import get_runtime

    caps = DeviceCaps.from_runtime(get_runtime())
    for dtype in ("f32", "f16"):
        for case in CASES:
            a, bb = operands(*case[:4], dtype, *case[4:])
            with experimental_offered():
                offered = variants(problem(a, bb, dtype), caps) if (dtype != "f16" or caps.shader_f16) else []
            for v in offered:
                if ".u4" in v:
                    continue  # the streaming gemv forms: test_streaming_gemv_* below
                if seen.get((dtype, v), 0) < 1:
                    seen[(dtype, v)] = seen.get((dtype, v), 0) + 1
                    yield pytest.param(dtype, case, v, id=f"{dtype}-{v}-{'x'.join(map(str, case[:4]))}")


@pytest.mark.parametrize("dtype,case,variant", list(_variant_cases()))
def test_variant_matches_torch(rt, caps, dtype, case, variant):
    gen = torch.Generator().manual_seed(sum(case[:4]))
    a, bb = operands(*case[:4], dtype, *case[4:], gen=gen)
    check(rt, caps, problem(a, bb, dtype), a, bb, variant)


@pytest.mark.parametrize("variant,ta", [("tile128x128.r8x16.k8.l4.db.ap.bv.v4", False),
                                        ("tile128x128.r8x8.k8.l4.db.ap.bv.v4", False),
                                        ("tile128x128.r8x16.k8.l4.db.bv.v4", False),
                                        ("tile128x128.r8x16.k8.l4.db.bv.v4", True)])
def test_b_units_stored_whole(rt, caps, variant, ta):
    """".bv": a B loaded in vec4s along N goes into its K tile in one store a unit (both buffers, a cut
    last tile of K and N), A loaded along K or (not padded: .ap needs a K-contiguous A) along M."""
    gen = torch.Generator().manual_seed(7)
    a, bb = operands(2, 136, 196, 40, "f32", ta, False, gen=gen)
    p = problem(a, bb, "f32")
    assert variant in variants(p, caps)
    src = plan_matmul(dataclasses.replace(p, out=Layout(0, 136 * 196, 196, 1)), caps, variant).wgsl
    assert re.search(r"Bs\[256u \+ \(bs0k \* 128u \+ bs0i\) / 4u\] = bs0;", src)
    check(rt, caps, p, a, bb, variant)


def test_default_variant_on_every_case(rt, caps):
    gen = torch.Generator().manual_seed(1)
    for case in CASES:
        a, bb = operands(*case[:4], "f32", *case[4:], gen=gen)
        check(rt, caps, problem(a, bb, "f32"), a, bb, None)


def test_vec4_form_is_picked_when_layouts_allow(caps):
    a, bb = operands(1, 64, 64, 64, "f32")
    assert variants(problem(a, bb, "f32"), caps)[0].endswith(".v4")
    a, bb = operands(1, 64, 63, 62, "f32")  # K and N not multiples of 4: scalar loads only
    assert not any(v.endswith(".v4") for v in variants(problem(a, bb, "f32"), caps))


@pytest.mark.parametrize("act", sorted(ACTIVATIONS, key=str))
def test_epilogues(rt, caps, act):
    gen = torch.Generator().manual_seed(3)
    a, bb = operands(2, 37, 45, 31, "f32", gen=gen)
    bias = torch.randn(45, generator=gen).expand(2, 37, 45)  # broadcast bias (stride 0 rows/batch)
    residual = torch.randn(2, 37, 45, generator=gen)
    p = problem(a, bb, "f32", bias=lay(bias), residual=lay(residual), activation=act, alpha=0.5, beta=2.0)
    cheap = [v for v in variants(p, caps) if v.startswith(("tile32x32", "tile16x64", "tile32x64"))]
    check(rt, caps, p, a, bb, cheap[len(str(act)) % len(cheap)], bias, residual, act, 0.5, 2.0)


def test_gemv_epilogue_and_f16(rt, caps):
    gen = torch.Generator().manual_seed(4)
    for dtype in ("f32", "f16") if caps.shader_f16 else ("f32",):
        a, bb = operands(1, 2, 72, 48, dtype, tb=True, gen=gen)
        bias = torch.randn(72, generator=gen).to(TORCH[dtype]).expand(1, 2, 72)
        p = problem(a, bb, dtype, bias=lay(bias), activation="relu", beta=0.5)
        names = [v for v in variants(p, caps) if v.startswith("gemv")]
        assert names
        for v in names:
            check(rt, caps, p, a, bb, v, bias, act="relu", beta=0.5)


def test_subgroup_reduction_gemv(rt, caps):
    if not caps.subgroups and "subgroups" not in caps.features:
        pytest.skip("adapter has no subgroups")
    sg_caps = caps if caps.subgroup_size else dataclasses.replace(caps, subgroup_size=8)  # lavapipe: 8
    gen = torch.Generator().manual_seed(5)
    a, bb = operands(1, 1, 40, 256, "f32", tb=True, gen=gen)
    p = problem(a, bb, "f32")
    names = [v for v in variants(p, sg_caps) if ".sg" in v]
    assert names and names[0].startswith("gemv.k64n4.sg")
    for v in names:
        check(rt, sg_caps, p, a, bb, v)


def test_batch_strides_and_sliced_views(rt, caps):
    gen = torch.Generator().manual_seed(6)
    a, bb = operands(3, 20, 36, 24, "f32", sliced=True, gen=gen)
    bb = torch.randn(36, 24, generator=gen).t().unsqueeze(0).expand(3, 24, 36)  # shared weight, stride 0
    p = problem(a, bb, "f32")
    for v in variants(p, caps)[:2]:
        check(rt, caps, p, a, bb, v)


@pytest.mark.parametrize("group", [2, 3, 8])
def test_grouped_launch_order_covers_every_tile_once(rt, caps, monkeypatch, group):
    """Tiles launched `group` rows at a time down each column: 5 x 3 tiles of 32 (a last group of fewer
    rows where `group` does not divide 5, one group of all where it exceeds them), batched, with bias."""
    name = f"tile32x32.r2x2.k16.g{group}"
    monkeypatch.setitem(VARIANTS, name, dataclasses.replace(VARIANTS["tile32x32.r2x2.k16"], group=group))
    gen = torch.Generator().manual_seed(group)
    a, bb = operands(2, 150, 70, 40, "f32", gen=gen)
    bias = torch.randn(70, generator=gen).expand(2, 150, 70)
    p = problem(a, bb, "f32", bias=lay(bias))
    assert name in variants(p, caps)
    launch = plan_matmul(p, caps, name)
    assert launch.grid == (3, 5, 2) and "@builtin(num_workgroups) nwg" in launch.wgsl
    check(rt, caps, p, a, bb, name, bias=bias)


@pytest.mark.parametrize("form", ["pl2", "pl3", "db", "db.ap"])
@pytest.mark.parametrize("k", [8, 40, 56], ids=lambda k: f"k{k}")
def test_deep_pipelined_tiles_match_torch(rt, caps, monkeypatch, form, k):
    """Two or three K tiles of registers in flight, or two K-tile buffers (also with the A tile's lines
    padded, ".ap", offered in the vec4 form only): one K tile (fewer than a loop iteration's steps), an
    odd count (the loop leaves after its first step) and a count the steps divide, batched, B
    transposed."""
    name = f"tile64x64.r4x4.k16.l4.{form}"
    depth = int(form[2:]) if form.startswith("pl") else 0
    monkeypatch.setitem(VARIANTS, name, TiledSpec(64, 64, 16, 4, 4, True, pipelined=depth,
                                                  double=form.startswith("db"), a_pad=form.endswith("ap")))
    gen = torch.Generator().manual_seed(k + depth)
    a, bb = operands(2, 40, 36, k, "f32", False, True, gen=gen)
    p = problem(a, bb, "f32")
    offered = variants(p, caps)
    if form.endswith("ap"):
        assert name not in offered
        name += VEC_SUFFIX
    assert name in offered
    src = plan_matmul(p, caps, name).wgsl
    steps = depth or 2
    assert src.count("workgroupBarrier();") == (2 * depth or 3) and f"t += {16 * steps}u" in src
    check(rt, caps, p, a, bb, name)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_vector_stored_outputs_match_torch(rt, caps, monkeypatch, dtype):
    """".o4": each invocation's groups of 4 adjacent outputs stored at once (finish4), through every
    epilogue step, on tiles cut by M and N (the partial tile's groups past N store nothing), batched, B
    transposed; offered only where the output's rows are 4-aligned."""
    name = "tile64x64.r4x4.k16.l4.db.o4"
    monkeypatch.setitem(VARIANTS, name, TiledSpec(64, 64, 16, 4, 4, True, double=True, out_vec=True))
    gen = torch.Generator().manual_seed(7)
    a, bb = operands(2, 70, 132, 40, dtype, False, True, gen=gen)
    t = TORCH[dtype]
    bias = torch.randn(132, generator=gen).to(t).expand(2, 70, 132)
    residual = torch.randn(2, 70, 132, generator=gen).to(t)
    p = problem(a, bb, dtype, bias=lay(bias), residual=lay(residual), activation="gelu", alpha=0.5, beta=2.0)
    assert name + VEC_SUFFIX in variants(p, caps) and name not in variants(p, caps)
    src = plan_matmul(p, caps, name + VEC_SUFFIX).wgsl
    assert f"O: array<vec4<{dtype}>>" in src and src.count("  finish4(batch") == 4
    check(rt, caps, p, a, bb, name + VEC_SUFFIX, bias, residual, "gelu", 0.5, 2.0)
    a, bb = operands(1, 70, 130, 40, dtype, gen=gen)   # rows of 130: not offered
    assert not any(v.endswith(".o4" + VEC_SUFFIX) for v in variants(problem(a, bb, dtype), caps))


def test_subgroup_matrix_variant_source(caps):
    tc = dataclasses.replace(caps, features=caps.features | {"shader-f16",
                                                             "chromium-experimental-subgroup-matrix"},
                             subgroup_size=32, subgroup_matrix_configs=(("f16", "f32", 16, 16, 16),),
                             limits=dict(caps.limits) | {"max-compute-workgroup-storage-size": 49152})
    a, bb = operands(1, 256, 256, 256, "f16")
    p = problem(a, bb, "f16")
    names = variants(p, tc)
    assert names[0] == "sgmat.w1x1.f2x2.k32"
    assert all(n in names for n in VARIANTS if n.startswith("sgmat"))
    launch = plan_matmul(p, tc)
    assert "enable chromium_experimental_subgroup_matrix;" in launch.wgsl
    assert "subgroupMatrixMultiplyAccumulate" in launch.wgsl and launch.workgroup_size == (32, 1, 1)
    # Dawn wants uniform matrix offsets: per-subgroup sub-arrays through pointers, offsets from loop
    # counters and constants only
    four = plan_matmul(p, tc, "sgmat.w2x2.f2x2.k32")
    assert four.workgroup_size == (128, 1, 1) and four.grid == (4, 4, 1)
    loads = [ln for ln in four.wgsl.splitlines() if "subgroupMatrix" in ln and "(&" in ln]
    assert loads and all("(&As[sm], " in ln or "(&Bs[sn], " in ln or "(&Cs[sg], 0u," in ln for ln in loads)
    assert not any(n.startswith("sgmat") for n in variants(problem(*operands(1, 256, 256, 256, "f32"),
                                                                     "f32"), tc))
    # several subgroups per workgroup (H200: 93 TFLOP/s at 4096^3): a subgroup index li / 32, uniform per
    # subgroup, with the matrix builtins' workgroup-scope uniformity rule off
    multi = plan_matmul(p, tc, "sgmat.w4x2.f2x2.k32")
    assert multi.workgroup_size == (256, 1, 1) and multi.grid == (4, 2, 1)
    # pipelined: tile 0 staged before the K loop, the next tile's 16-byte loads (4 + 4 per invocation)
    # before the multiplies and its stores after them
    piped = plan_matmul(p, tc, "sgmat.w2x2.f4x4.k32.pl").wgsl
    assert piped.count("vec4<u32>(0u);") == 16 and "let tn = t + 32u;" in piped
    loop = piped[piped.index("for (var t = 0u;"):]
    assert loop.index("wb3 = B[") < loop.index("subgroupMatrixMultiplyAccumulate") < loop.index("] = h.x;")
    # two tiles in flight: set 1 loaded with tile 1 before the loop; each of the two steps loads the
    # tile two ahead into its own set and stores the other set
    deep = plan_matmul(p, tc, "sgmat.w4x2.f4x4.k32.pl2").wgsl
    head, loop = deep[:deep.index("for (var t = 0u;")], deep[deep.index("for (var t = 0u;"):]
    assert "let gc = 32u + c;" in head and "was10 = A[" in head and "was00 = A[" not in head
    first, second = loop.split("if (t + 32u >= K) { break; }")
    assert "let tn = t + 64u;" in first and "was00 = A[" in first and "wa1[q]" not in first
    order = [first.index(x) for x in ("was00 = A[", "subgroupMatrixMultiplyAccumulate", "was10[q]")]
    assert order == sorted(order)
    assert "let tn = t + 96u;" in second and "was10 = A[" in second and "was00[q]" in second
    # two K-tile buffers with the loads two tiles ahead: tile 0 staged into buffer 0 and tile 1 loaded
    # into set 1 before the loop; step s loads the tile two ahead into set s, multiplies buffer s and
    # stores set 1 - s into buffer 1 - s, one barrier per step
    dbl = plan_matmul(p, tc, "sgmat.w2x4.f4x4.k16.db.pl2.g8.rot").wgsl
    head, loop = dbl[:dbl.index("for (var t = 0u;")], dbl[dbl.index("for (var t = 0u;"):]
    assert "let gc = 16u + c;" in head and "was10 = A[" in head and "was00 = A[" not in head
    first, second = loop.split("if (t + 16u >= K) { break; }")
    assert "let tn = t + 32u;" in first and "let tn = t + 48u;" in second
    order = [first.index(x) for x in ("was00 = A[", "subgroupMatrixMultiplyAccumulate", "(was10, was10.yzwx")]
    assert order == sorted(order) and "As[1u * 2u + (r) / 64u]" in first and "(&As[sm]," in first
    assert "(was00, was00.yzwx" in second and "As[0u * 2u + (r) / 64u]" in second
    assert "(&As[1u * 2u + sm]," in second and first.count("workgroupBarrier();") == 1
    grouped = plan_matmul(p, tc, "sgmat.w2x2.f4x4.k32.g8")   # the grouped launch order of the tiles
    assert grouped.grid == (2, 2, 1) and "@builtin(num_workgroups) nwg" in grouped.wgsl
    assert "let m0 = (row0 + q % rows) * 128u;" in grouped.wgsl
    assert "li / 32u" in multi.wgsl and "diagnostic(off, chromium.subgroup_matrix_uniformity);" in multi.wgsl


def test_errors(caps):
    a, bb = operands(1, 4, 4, 4, "f32")
    with pytest.raises(ValueError, match="activation"):
        plan_matmul(problem(a, bb, "f32", activation="swish"), caps)
    with pytest.raises(ValueError, match="not one of"):
        plan_matmul(problem(a, bb, "f32"), caps, "tile999")
    no_f16 = dataclasses.replace(caps, features=caps.features - {"shader-f16"})
    with pytest.raises(TypeError, match="shader-f16"):
        plan_matmul(problem(a, bb, "f16"), no_f16)


# the streaming (bandwidth) gemv forms over the decode shape classes, in miniature: (b, m, n, k, a
# transposed, b transposed); B transposed is a linear weight [N, K], else [K, N] like attention's V
STREAM_CASES = [(1, 1, 100, 256, False, True),   # 16-byte loads, unrolled steps and a tail
                (2, 3, 37, 72, False, True),     # batched, 3 rows, odd N
                (1, 1, 45, 61, False, True),     # K not a multiple of the vector width: scalar forms
                (4, 1, 40, 96, False, False),    # [K, N], 16-byte column loads, batched
                (1, 2, 33, 50, False, False)]    # odd N: scalar column form


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("case", STREAM_CASES,
                         ids=lambda c: "x".join(map(str, c[:4])) + ("t" if c[5] else ""))
def test_streaming_gemv_matches_torch(rt, caps, dtype, case):
    if dtype == "f16" and not caps.shader_f16:
        pytest.skip("the adapter has no shader-f16")
    gen = torch.Generator().manual_seed(sum(case[:4]))
    a, bb = operands(*case[:4], dtype, *case[4:], gen=gen)
    p = problem(a, bb, dtype)
    names = [v for v in variants(p, caps) if ".u4" in v]
    vec_ok = case[3] % 8 == 0 if case[5] else case[2] % 8 == 0
    assert names and any(v.endswith(".v4") for v in names) == vec_ok
    for v in names:
        check(rt, caps, p, a, bb, v)


def _sg_caps(caps):
    if "subgroups" not in caps.features:
        pytest.skip("adapter has no subgroups")
    return caps if caps.subgroup_size else dataclasses.replace(caps, subgroup_size=8)  # lavapipe: 8


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_streaming_gemv_subgroup_forms(rt, caps, dtype):
    if dtype == "f16" and not caps.shader_f16:
        pytest.skip("the adapter has no shader-f16")
    sg_caps = _sg_caps(caps)
    gen = torch.Generator().manual_seed(8)
    a, bb = operands(1, 1, 40, 512 if dtype == "f16" else 136, dtype, tb=True, gen=gen)
    p = problem(a, bb, dtype)
    names = [v for v in variants(p, sg_caps) if ".u4.sg" in v]
    assert len(names) == 8  # 16-byte and scalar forms of each lane count
    for v in names:
        check(rt, sg_caps, p, a, bb, v)


def test_streaming_gemv_shuffle_reduction(rt, caps):
    """Fewer lanes per row than a subgroup: the butterfly of subgroupShuffleXor."""
    from torch_webgpu.kernels import matmul_wgsl

    sg_caps = _sg_caps(caps)
    gen = torch.Generator().manual_seed(9)
    a, bb = operands(1, 1, 70, 96, "f32", tb=True, gen=gen)
    o = torch.full((1, 1, 70), float("nan"))
    p = dataclasses.replace(problem(a, bb, "f32"), out=lay(o))
    epi = matmul_wgsl.Epilogue("f32", False, False, None)
    src = matmul_wgsl.gemv_stream_k_source(epi, 4, 32, 4, 1, 4, sg_caps.subgroup_size)
    launch = dataclasses.replace(plan_matmul(p, sg_caps, "gemv.k8n16.u4.sg.v4"), grid=(3, 1, 1), wgsl=src)
    got = run_launch(rt, launch, {"a": a, "b": bb}, o)
    torch.testing.assert_close(got, a @ bb, atol=1e-4, rtol=1e-4)


def test_streaming_gemv_defaults(caps):
    """Hardware GPUs default to a streaming form sized to the shape; software Vulkan keeps split-K."""
    gpu = dataclasses.replace(caps, cpu=False, subgroup_size=32, features=caps.features | {"subgroups"})
    a, bb = operands(1, 1, 2048, 2048, "f32", tb=True)
    assert variants(problem(a, bb, "f32"), gpu)[0] == "gemv.k64n2.u4.sg.v4"
    assert not variants(problem(a, bb, "f32"), dataclasses.replace(caps, cpu=True))[0].startswith(
        ("gemv.k8n", "gemv.k16n8.", "gemv.k32n4.u", "gemv.k64n2"))
    a, bb = operands(1, 1, 256, 2048, "f32")   # [K, N] weights
    assert variants(problem(a, bb, "f32"), gpu)[0] == "gemv.n16k16.u4.v4"
    a, bb = operands(1, 1, 32, 2048, "f32")   # P @ V: N = head_dim, 1024 invocations where they fit
    wide = with_limits(gpu, max_compute_invocations_per_workgroup=1024,
                       max_compute_workgroup_storage_size=32768)
    assert variants(problem(a, bb, "f32"), wide)[0] == "gemv.n8k128.u4.v4"
    narrow = with_limits(gpu, max_compute_invocations_per_workgroup=256)
    assert variants(problem(a, bb, "f32"), narrow)[0] == "gemv.n8k32.u4.v4"


def _split_names_of(names):
    return [v for v in names if getattr(parse_variant(v).spec, "splits", 1) > 1]


def _split_names(p, caps):
    return _split_names_of(variants(p, caps))


# (b, m, n, k, a transposed, b transposed): ViT's odd 197 rows with a linear's [N, K] weight (vec4 loads,
# K not a multiple of the tile depth x slices), and batch 2 with scalar loads (K odd, A stored transposed)
SPLIT_CASES = [(1, 197, 72, 600, False, True), (2, 45, 70, 601, True, False)]


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("case", SPLIT_CASES, ids=lambda c: "x".join(map(str, c[:4])))
def test_split_k_variants_match_torch(rt, caps, dtype, case):
    """Every split-K variant offered (both tiles), the whole epilogue applied by the combine pass."""
    if dtype == "f16" and not caps.shader_f16:
        pytest.skip("adapter has no shader-f16")
    gen = torch.Generator().manual_seed(sum(case[:4]))
    b, m, n, k = case[:4]
    a, bb = operands(*case[:4], dtype, *case[4:], gen=gen)
    bias = torch.randn(n, generator=gen).to(TORCH[dtype]).expand(b, m, n)
    residual = torch.randn(b, m, n, generator=gen).to(TORCH[dtype])
    act = "gelu" if b == 1 else "relu"
    p = problem(a, bb, dtype, bias=lay(bias), residual=lay(residual), activation=act, alpha=0.5, beta=2.0)
    names = _split_names(p, caps)
    assert len(names) == 2 and all(v.endswith(".v4") == (b == 1) for v in names), names
    for variant in names:
        plan = plan_matmul_steps(p, caps, variant)
        assert len(plan.steps) == 2 and plan.scratch["partials"] == 4 * plan.steps[0].grid[2] * m * n
        check(rt, caps, p, a, bb, variant, bias, residual, act, 0.5, 2.0)


def test_split_k_is_offered_for_few_tiles_only(caps):
    def names(m, n, k, batch=1):
        a = Layout(0, m * k, k, 1)
        return variants(MatmulProblem(batch, m, n, k, a, Layout(0, 0, 1, k), Layout(0, m * n, n, 1)), caps)

    vit = names(197, 768, 768)   # 84 tiles of 32x64, 48 of 64x64: sliced into >= 192 workgroups
    assert vit[SPLIT_AFTER:SPLIT_AFTER + 2] == ["tile32x64.r2x4.k32.s4.v4", "tile64x64.r4x4.k16.l4.s4.v4"]
    assert not _split_names_of(vit[:SPLIT_AFTER])          # never the default
    assert "tile64x64.r4x4.k16.l4.s8.v4" in names(197, 768, 3072)   # long K: more slices
    for few_k_or_many_tiles in (names(197, 768, 256), names(4096, 4096, 4096), names(197, 768, 768, 8),
                                names(2, 768, 768)):
        assert not _split_names_of(few_k_or_many_tiles)


def test_split_k_needs_its_two_step_plan(caps):
    p = MatmulProblem(1, 197, 768, 768, Layout(0, 0, 768, 1), Layout(0, 0, 1, 768), Layout(0, 0, 768, 1))
    with pytest.raises(ValueError, match="plan_matmul_steps"):
        plan_matmul(p, caps, "tile32x64.r2x4.k32.s4.v4")
    one = plan_matmul_steps(p, caps, "tile32x64.r2x4.k32.v4")
    assert one.steps == (plan_matmul(p, caps, "tile32x64.r2x4.k32.v4"),) and one.scratch == {}


@pytest.mark.parametrize("bm,bk,banks,unpadded", [(128, 8, 32, 16), (256, 8, 32, 16), (64, 16, 16, 8)],
                         ids=str)
def test_padded_a_tile_spreads_the_transposing_stores(bm, bk, banks, unpadded):
    """The transposing stores of a K-contiguous A into the [k][i] tile (unit e at row e / (bk/4), k-quad
    e % (bk/4); component q to line k + q): unpadded, every warp's 32 stores fall on 16 banks (k8) or 8
    (k16); with lines LINE_PAD words apart on 32 or 16."""
    import numpy as np

    from torch_webgpu.kernels.matmul_wgsl import LINE_PAD

    quads = bk // 4
    e = np.arange(bm * quads)
    kk, ii = (e % quads) * 4, e // quads
    for q in range(4):
        for line, want in ((bm + LINE_PAD, banks), (bm, unpadded)):
            words = (kk + q) * line + ii
            assert {len(set(words[w:w + 32] % 32)) for w in range(0, len(e), 32)} == {want}


def test_fused_gelu_is_the_eager_gelu(rt, caps, webgpu):
    """One erf (issue 40): a matmul's GELU epilogue evaluates the prelude's `erf_`, as the eager GELU does, so
    GELU(A @ B) fused matches the eager GELU of the unfused product on the device, and torch CPU within
    float32's default tolerances (the OpInfo ones)."""
    gen = torch.Generator().manual_seed(0)
    a, bb = operands(1, 48, 40, 64, "f32", gen=gen)
    a = a * 0.25   # products of about unit size: GELU's curved part, not its linear tails
    p = problem(a, bb, "f32")
    o = torch.full((1, 48, 40), float("nan"))
    name = variants(p, caps)[0]
    gelu = plan_matmul(dataclasses.replace(p, activation="gelu"), caps, name)
    fused = run_launch(rt, gelu, {"a": a, "b": bb}, o)
    plain = run_launch(rt, plan_matmul(p, caps, name), {"a": a, "b": bb}, o)
    eager = torch.nn.functional.gelu(plain.to(webgpu)).cpu()
    torch.testing.assert_close(fused, eager, rtol=2e-7, atol=1e-7)
    torch.testing.assert_close(fused, torch.nn.functional.gelu(a @ bb))
    assert "fn erf_(" in gelu.wgsl and "erf_approx" not in gelu.wgsl
