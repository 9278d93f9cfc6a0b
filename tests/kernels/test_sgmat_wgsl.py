"""The tensor-core kernels (sgmat_wgsl): lavapipe has no subgroup matrices, so the staging runs alone here,
the bank model behind the rotated stores is checked against the tiles' layouts, and whole kernels run with
their subgroup matrices emulated in plain WGSL (sgmat_emulation) against torch."""

from __future__ import annotations

import re

import pytest
import torch

from .helpers import run_launch, run_plan


def staging_kernel(threads: int, tile: str, length: int, element: str, loads: str, stores: str) -> str:
    """A kernel that runs one tile's staging (`loads`, `stores` into the workgroup array T of type `tile`)
    and copies T's `length` elements (T's element i: `element`) out to O."""
    return f"""enable f16;
struct Params {{ a: vec4<u32> }}
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> A: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> O: array<f16>;
var<workgroup> T: {tile};
@compute @workgroup_size({threads})
fn main(@builtin(local_invocation_index) li: u32) {{
  let batch = 0u; let m0 = 0u; let t = 0u;
{loads}
{stores}
  workgroupBarrier();
  for (var i = li; i < {length}u; i += {threads}u) {{ O[i] = {element}; }}
}}
"""


ROTATION = "((li + (li >> 3u) * 2u) & 3u)"
UNIT_ORDERS = {"plain": ("", ""), "rotated": (ROTATION, ""), "down": ("", "down"), "pairs": ("", "pairs")}


@pytest.mark.parametrize("order", UNIT_ORDERS)
@pytest.mark.parametrize("rows,cols,along,threads", [(128, 32, "cols", 128), (32, 128, "rows", 128),
                                                      (64, 16, "rows", 96), (16, 64, "cols", 32)])
def test_split_staging_keeps_every_element(rt, caps, rows, cols, along, threads, order):
    """staging_vec8_split (the tensor-core kernels' batched staging: lavapipe has no subgroup matrices,
    so the staging runs alone here) fills a padded f16 tile exactly as the matrix holds it, zeros past
    the bounds, also when the units do not divide among the invocations (96), with each invocation's
    stores rotated (every rotation 0…3 occurs) and with the units 8 lines at a time."""
    from torch_webgpu.kernels.launch import PARAMS, KernelLaunch
    from torch_webgpu.kernels.sgmat_wgsl import staging_vec8_split

    if not caps.shader_f16:
        pytest.skip("no shader-f16")
    pad = 8
    lines, length = (rows, cols) if along == "cols" else (cols, rows)   # lines along the contiguous axis
    stride = length + pad
    store = f"T[r * {stride}u + c]" if along == "cols" else f"T[c * {stride}u + r]"
    rotation, unit_order = UNIT_ORDERS[order]
    loads, stores = staging_vec8_split(rows, cols, "A", "a", "m0", f"{rows}u", "t", f"{cols - 8}u", store,
                                       along, threads, rotation=rotation, order=unit_order)
    assert ("let rot = " in stores) == bool(rotation)
    wgsl = staging_kernel(threads, f"array<f16, {lines * stride}>", lines * stride, "T[i]", loads, stores)
    x = torch.randn(rows, cols).half()
    strides, data = ((cols, 1), x) if along == "cols" else ((1, rows), x.t().contiguous())
    launch = KernelLaunch("staging", wgsl, (1, 1, 1), (threads, 1, 1), (PARAMS, "a", "out"),
                          params=(0, 0, *strides), read_only=frozenset({1}))
    got = run_launch(rt, launch, {"a": data.contiguous()},
                     torch.full((lines * stride,), float("nan")).half())
    got = got.reshape(lines, stride)[:, :length]
    want = x.clone()
    want[:, cols - 8:] = 0   # the units past the column bound: zeros
    torch.testing.assert_close(got if along == "cols" else got.t(), want, rtol=0, atol=0)


@pytest.mark.parametrize("order", UNIT_ORDERS)
def test_split_staging_into_sub_arrays(rt, caps, order):
    """The tensor-core B tile's layout: one padded sub-array per 64 columns (a unit's stores index the
    sub-array by the unit's own column, unit_at)."""
    from torch_webgpu.kernels.launch import PARAMS, KernelLaunch
    from torch_webgpu.kernels.sgmat_wgsl import staging_vec8_split

    if not caps.shader_f16:
        pytest.skip("no shader-f16")
    rows, cols, width, stride, threads = 32, 128, 64, 72, 128
    size = rows * stride
    rotation, unit_order = UNIT_ORDERS[order]
    loads, stores = staging_vec8_split(rows, cols, "A", "a", "m0", f"{rows}u", "t", f"{cols}u",
                                       f"T[c / {width}u][r * {stride}u + c % {width}u]", "cols", threads,
                                       rotation=rotation, order=unit_order)
    wgsl = staging_kernel(threads, f"array<array<f16, {size}>, 2>", 2 * size, f"T[i / {size}u][i % {size}u]",
                          loads, stores)
    x = torch.randn(rows, cols).half()
    launch = KernelLaunch("staging", wgsl, (1, 1, 1), (threads, 1, 1), (PARAMS, "a", "out"),
                          params=(0, 0, cols, 1), read_only=frozenset({1}))
    got = run_launch(rt, launch, {"a": x}, torch.full((2 * size,), float("nan")).half())
    halves = got.reshape(2, rows, stride)[:, :, :width]
    torch.testing.assert_close(torch.cat([halves[0], halves[1]], dim=1), x, rtol=0, atol=0)


@pytest.mark.parametrize("geometry", [(4, 2, 4, 4, 32, False), (2, 2, 4, 4, 32, False),
                                      (4, 2, 4, 4, 32, True), (4, 2, 4, 4, 16, False)],
                         ids=lambda g: "w{}x{}.f{}x{}.k{}.{}".format(*g))
def test_store_rotation_spreads_the_staging_stores_over_the_banks(geometry):
    """The tensor-core tiles' 16-byte staging units put 4 invocations of a store on each bank of the
    model (32 banks, 32-wide warps); the rotation store_rotation picks takes each tile to one."""
    import numpy as np

    from torch_webgpu.kernels.sgmat_wgsl import SgmatTile, staging_words, store_cycles, store_rotation

    sm, sn, fm, fn, bk, b_cols = geometry
    g = SgmatTile(sm, sn, fm, fn, bk, 32, b_cols=b_cols)
    b_along = "rows" if b_cols else "cols"
    for rows, cols, along, flat in ((g.bm, bk, "cols", g.a_flat), (bk, g.bn, b_along, g.b_flat)):
        words = staging_words(rows, cols, along, g.threads, flat)
        rounds = words.shape[0]
        assert (words >= 0).all()   # every round full: the ideal below counts whole warps
        li = np.arange(g.threads)   # the WGSL rotation evaluated in numpy
        rotation = store_rotation(rows, cols, along, g.threads, flat)
        rotated = eval(rotation.replace("u", ""), {"li": li}) * np.ones(g.threads, dtype=int)
        ideal = 4 * rounds * (g.threads // 32)   # one cycle per store pair and warp
        assert store_cycles(words, np.zeros(g.threads, dtype=int)) == 4 * ideal
        assert store_cycles(words, rotated) == ideal


@pytest.mark.parametrize("geometry", [(8, 2, 2, 4, 32), (4, 2, 4, 4, 32), (8, 2, 2, 4, 16)],
                         ids=lambda g: "w{}x{}.f{}x{}.k{}".format(*g))
def test_down_order_takes_whole_unit_stores_off_each_others_banks(geometry):
    """Stored 16 bytes at a time (WIDE_PHASE invocations a cycle), the A tile's units along its rows put
    two invocations on some banks; 8 lines at a time (unit_origin's `down`) every operand's stores take
    the least, 4 cycles per warp, in both layouts of B."""
    from torch_webgpu.kernels.sgmat_wgsl import SgmatTile, staging_words, wide_store_cycles

    for b_cols in (False, True):
        g = SgmatTile(*geometry, 32, b_cols=b_cols)
        tiles = ((g.bm, g.bk, "cols", g.a_flat), (g.bk, g.bn, "rows" if b_cols else "cols", g.b_flat))
        for rows, cols, along, flat in tiles:
            least = 4 * rows * cols // 8 // 32
            assert wide_store_cycles(staging_words(rows, cols, along, g.threads, flat, order="down")) == least
        a_along = staging_words(g.bm, g.bk, "cols", g.threads, g.a_flat)
        assert wide_store_cycles(a_along) == 2 * 4 * g.bm * g.bk // 8 // 32


@pytest.mark.parametrize("geometry", [(8, 2, 2, 4, 32), (4, 4, 2, 4, 32), (4, 2, 4, 4, 32)],
                         ids=lambda g: "w{}x{}.f{}x{}.k{}".format(*g))
def test_pairs_order_takes_whole_unit_stores_off_each_others_banks_and_keeps_loads_on_two_lines(geometry):
    """The 32-deep A tile's units in `pairs` (lines j and j + 4 in one 16-byte store phase): its stores
    take the least, 4 cycles per warp (along the rows: 8), and each phase's global loads still read 2
    lines of A (`down`: 8); B, 16 units a line, keeps the order along its rows."""
    from torch_webgpu.kernels.sgmat_wgsl import (
        WIDE_PHASE,
        SgmatTile,
        staging_words,
        unit_origin,
        wide_store_cycles,
    )

    g = SgmatTile(*geometry, 32)
    least = 4 * g.bm * g.bk // 8 // 32
    assert wide_store_cycles(staging_words(g.bm, g.bk, "cols", g.threads, g.a_flat, order="pairs")) == least
    for order, lines in (("pairs", 2), ("", 2), ("down", 8)):
        phases = [{unit_origin(e, g.bm, g.bk, "cols", order)[0] for e in range(p, p + WIDE_PHASE)}
                  for p in range(0, g.bm * g.bk // 8, WIDE_PHASE)]
        assert max(len(rows) for rows in phases) == lines, order
    b_units = g.bk * g.bn // 8
    assert ([unit_origin(e, g.bk, g.bn, "cols", "pairs") for e in range(b_units)]
            == [unit_origin(e, g.bk, g.bn, "cols") for e in range(b_units)])


def test_tile_layouts_match_their_workgroup_lvalues():
    """SgmatTile.a_flat / b_flat (the bank model's offsets) agree with the WGSL lvalues a_store / b_store
    (sub-arrays of As and Bs laid end to end)."""
    from torch_webgpu.kernels.sgmat_wgsl import SgmatTile, tile_at

    for g in (SgmatTile(4, 2, 4, 4, 32, 32), SgmatTile(2, 4, 2, 4, 16, 32, b_cols=True)):
        bw = g.fn * 16
        b_sub = bw * (g.bk + g.pad) if g.b_cols else g.bk * (bw + g.pad)
        for store, flat, sub, rows, cols in ((g.a_store, g.a_flat, g.fm * 16 * (g.bk + g.pad), g.bm, g.bk),
                                             (g.b_store, g.b_flat, b_sub, g.bk, g.bn)):
            for r, c in ((0, 0), (rows - 1, cols - 1), (rows // 2 + 1, cols // 2 + 3), (5, cols - 9)):
                outer, inner = re.fullmatch(r"\w+\[(.*?)\]\[(.*)\]", tile_at(store, str(r), str(c))).groups()
                at = [eval(x.replace("u", "").replace("/", "//")) for x in (outer, inner)]
                assert at[0] * sub + at[1] == flat(r, c)


# Each mechanism of the tensor-core K loop in a small tile (the big ones exceed lavapipe's 32 KiB of
# workgroup memory or take it ~20 s to compile), plus the one 256x128 tile that fits: the kernel runs with
# its subgroup matrices emulated (sgmat_emulation) against torch.
EMULATED = {"sgmat.small.k32": dict(), "sgmat.small.k32.g8": dict(group=8),
            "sgmat.small.k32.pl": dict(pipelined=1),
            "sgmat.small.k16.pl2.g8.rot": dict(bk=16, group=8, pipelined=2, rotate=True),
            "sgmat.small.k16.pl3": dict(bk=16, pipelined=3),
            "sgmat.small.k16.db.rot": dict(bk=16, double=True, rotate=True),
            "sgmat.small.k32.pl.g8.dn": dict(group=8, pipelined=1, order="down"),
            "sgmat.small.k32.pl.g8.pr": dict(group=8, pipelined=1, order="pairs"),
            "sgmat.small.k48.pl.g8.rot.cs4": dict(bk=48, group=8, pipelined=1, rotate=True, results_rounds=4),
            "sgmat.small.k32.pl.g8.rot.bp": dict(group=8, pipelined=1, rotate=True, plain_b=True),
            "sgmat.small.k16.db.dn": dict(bk=16, double=True, order="down"),
            "sgmat.small.k16.db.pl2.dn.cs2": dict(bk=16, double=True, pipelined=2, order="down",
                                                  results_rounds=2),
            "sgmat.small.k16.db.pl2.g8.rot": dict(bk=16, group=8, pipelined=2, rotate=True, double=True),
            # K tiles of 16-byte words, results through them (".p16"; packed where A is staged along K
            # and B 8 at a time: the one-tile-b-nk and three-tiles cases)
            "sgmat.small.k32.p16": dict(packed=True),
            "sgmat.small.k32.pl.g8.rot.p16": dict(group=8, pipelined=1, rotate=True, packed=True),
            "sgmat.small.k16.db.p16": dict(bk=16, double=True, packed=True),
            # the results alternately through the K tiles and a scratch, one barrier each (".pp")
            "sgmat.small.k32.pl.p16.pp": dict(pipelined=1, packed=True, pingpong=True)}
# results stored 4 adjacent columns at a time (".o4"): offered where the output's rows are 4-aligned
EMULATED_O4 = {"sgmat.small.k32.pl.g8.rot.o4": dict(group=8, pipelined=1, rotate=True, out_vec=True),
               "sgmat.small.k48.pl.g8.rot.cs4.o4": dict(bk=48, group=8, pipelined=1, rotate=True,
                                                        results_rounds=4, out_vec=True),
               "sgmat.small.k32.pl.g8.o4.p16": dict(group=8, pipelined=1, out_vec=True, packed=True),
               "sgmat.small.k32.pl.o4.p16.pp": dict(pipelined=1, out_vec=True, packed=True, pingpong=True)}


@pytest.mark.parametrize("name", [*EMULATED, "sgmat.w4x4.f4x2.k32.pl.g8.rot"])
@pytest.mark.parametrize("m,n,k,b_nk", [(200, 130, 80, False), (96, 64, 16, True), (64, 160, 48, False)],
                         ids=["odd-tiles", "one-tile-b-nk", "three-tiles"])
def test_tensor_core_loop_with_emulated_matrices(rt, caps, monkeypatch, name, m, n, k, b_nk):
    _emulated_against_torch(rt, caps, monkeypatch, name, EMULATED, m, n, k, b_nk)


@pytest.mark.parametrize("name", [*EMULATED_O4, "sgmat.w4x4.f2x4.k32.pl.g8.rot.o4",
                                  "sgmat.w4x4.f2x4.k32.pl.g4.rot.o4.p16",
                                  "sgmat.w4x4.f2x4.k32.pl.rot.o4.p16.pp"])
@pytest.mark.parametrize("m,n,k,b_nk", [(200, 132, 80, False), (96, 64, 16, True), (64, 168, 48, False)],
                         ids=["odd-tiles-b-scalar", "one-tile-b-nk", "three-tiles"])
def test_tensor_core_results_stored_four_at_a_time(rt, caps, monkeypatch, name, m, n, k, b_nk):
    """".o4": each lane's 4 adjacent results through finish4, in whole and cut tiles (columns past N
    store nothing), B staged element by element (N = 132) or 8 at a time."""
    src = _emulated_against_torch(rt, caps, monkeypatch, name, EMULATED_O4, m, n, k, b_nk)
    assert "O: array<vec4<f16>>" in src and "finish4(batch" in src


def _emulated_against_torch(rt, caps, monkeypatch, name, small, m, n, k, b_nk) -> str:
    """Run tensor-core variant `name` (one of `small`'s 2x2-subgroup forms, offered under the name its spec
    derives, or a library variant, experimental ones too) with its subgroup matrices emulated against
    torch; its WGSL."""
    import dataclasses

    from torch_webgpu.kernels.matmul import VARIANTS, SgmatSpec, experimental_offered, plan_matmul_steps

    from .sgmat_emulation import emulate_subgroup_matrices
    from .test_matmul import lay, operands, problem

    if name in small:
        spec = SgmatSpec(2, 2, 2, 2, **(dict(bk=32) | small[name]))
        name = spec.name
        monkeypatch.setitem(VARIANTS, name, spec)
    tc = dataclasses.replace(caps, features=caps.features | {"chromium-experimental-subgroup-matrix"},
                             subgroup_size=32, subgroup_matrix_configs=(("f16", "f32", 16, 16, 16),),
                             limits=dict(caps.limits) | {"max-compute-workgroup-storage-size": 49152})
    a, bb = operands(1, m, n, k, "f16", False, b_nk, gen=torch.Generator().manual_seed(k))
    out = torch.full((1, m, n), float("nan"), dtype=torch.float16)
    p = dataclasses.replace(problem(a, bb, "f16"), out=lay(out))
    with experimental_offered():
        plan = plan_matmul_steps(p, tc, name)
    emulated = dataclasses.replace(plan.steps[0], wgsl=emulate_subgroup_matrices(plan.steps[0].wgsl))
    got = run_plan(rt, dataclasses.replace(plan, steps=(emulated,)), {"a": a, "b": bb}, out)
    torch.testing.assert_close(got.float(), (a.float() @ bb.float()).half().float(), atol=2e-2, rtol=2e-2)
    return plan.steps[0].wgsl


@pytest.mark.parametrize("b_cols", [False, True])
def test_unit_step_is_the_tile_layouts_distance_between_neighbouring_halves(b_cols):
    """unit_step read off a tile lvalue agrees with the tile's flat layout (SgmatTile.a_flat / b_flat)
    along the axis its units run, so a unit's stores `at + k * step` land where the per-element formula
    would put them."""
    from torch_webgpu.kernels.sgmat_wgsl import SgmatTile, unit_step

    g = SgmatTile(4, 4, 2, 4, 32, 32, b_cols=b_cols)
    b_along = "rows" if b_cols else "cols"
    for store, flat, along in ((g.a_store, g.a_flat, "cols"), (g.a_store, g.a_flat, "rows"),
                               (g.b_store, g.b_flat, b_along)):
        r, c = 8, 16
        step = flat(r, c + 1) - flat(r, c) if along == "cols" else flat(r + 1, c) - flat(r, c)
        assert unit_step(store, along) == step


def test_every_tensor_core_variant_loads_its_fragments_at_constant_offsets(caps):
    """Tint's robustness wraps a subgroup-matrix load in a bounds branch unless its offset, stride and
    array length are constants: every library variant's fragment loads have literal offsets and strides
    into fixed-size sub-arrays (on the H100 the branches cost 2-4%, h100-2026-12-05-probes3.md)."""
    import dataclasses
    import re

    from torch_webgpu.kernels.matmul import VARIANTS, experimental_offered, plan_matmul

    from .test_matmul import problem

    matrices = {"shader-f16", "chromium-experimental-subgroup-matrix"}
    tc = dataclasses.replace(caps, features=caps.features | matrices,
                             subgroup_size=32, subgroup_matrix_configs=(("f16", "f32", 16, 16, 16),),
                             limits=dict(caps.limits) | {"max-compute-workgroup-storage-size": 49152})
    a, b = torch.zeros(1, 512, 512, dtype=torch.float16), torch.zeros(1, 512, 512, dtype=torch.float16)
    p = problem(a, b, "f16")
    load = re.compile(r"subgroupMatrixLoad<[^>]+>, (?:row|col)_major>\(&[AB]s\[[^\]]+\], ([^,]+), ([^)]+)\)")
    with experimental_offered():
        sources = {name: plan_matmul(p, tc, name).wgsl for name, spec in VARIANTS.items()
                   if spec.kind == "sgmat"}
    for name, src in sources.items():
        loads = load.findall(src)
        assert loads, name
        literal = re.compile(r"\d+u")
        assert all(literal.fullmatch(off) and literal.fullmatch(stride) for off, stride in loads), name
        # majorness as a template parameter only: the boolean argument form is deprecated in Tint
        calls = re.findall(r"subgroupMatrix(?:Load|Store)[<(]", src)
        assert len(calls) == len(re.findall(r"subgroupMatrix(?:Load|Store)<[^(]*_major>\(", src)), name


def test_packed_tiles_pass_their_results_through_the_k_tiles():
    """".p16": 16-byte-word K tiles, one store per staging unit, and no results scratch of their own, so
    the 4096^3 leader needs 30 KiB of workgroup memory where its .rot form needs 46; where A is not
    staged along K (transposed A) the variant falls back to the rotated 2-byte stores and a scratch."""
    import dataclasses

    from torch_webgpu.kernels.launch import DeviceCaps
    from torch_webgpu.kernels.matmul import (
        Layout,
        MatmulProblem,
        experimental_offered,
        parse_variant,
        plan_matmul,
    )

    features = frozenset({"shader-f16", "subgroups", "chromium-experimental-subgroup-matrix"})
    tc = DeviceCaps(features=features, subgroup_size=32,
                    subgroup_matrix_configs=(("f16", "f32", 16, 16, 16),),
                    limits={"max-compute-workgroup-storage-size": 49152,
                            "max-compute-invocations-per-workgroup": 1024})
    n = 4096
    p = MatmulProblem(1, n, n, n, Layout(0, n * n, n, 1), Layout(0, n * n, n, 1), Layout(0, n * n, n, 1),
                      dtype="f16")
    name = "sgmat.w4x4.f2x4.k32.pl.g4.rot.o4.p16"
    with experimental_offered():
        src = plan_matmul(p, tc, name).wgsl
        fallback = plan_matmul(dataclasses.replace(p, a=Layout(0, n * n, 1, n)), tc, name).wgsl   # A^T
    assert "var<workgroup> As: array<array<vec4<u32>, 160>, 4>;" in src
    assert "var<workgroup> Cs" not in src and "subgroupMatrixStore<row_major>(&Bs[ssub], soff" in src
    assert re.search(r"As\[[^=]*\] = wa0;", src)   # one 16-byte store per unit
    assert parse_variant(name).spec.workgroup_bytes("f16") == 30720
    assert parse_variant("sgmat.w4x4.f2x4.k32.pl.g4.rot.o4").spec.workgroup_bytes("f16") == 47104
    assert "var<workgroup> Cs" in fallback and "vec4<u32>, 160>" not in fallback
