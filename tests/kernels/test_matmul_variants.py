"""The matmul variants name themselves (issue 40): every name is derived from its spec and parses back,
the shipping list holds every variant the autotuner can time, and a cached winner whose name the library
no longer knows is retuned, not run."""

from __future__ import annotations

import dataclasses
import itertools
import json

import pytest

from torch_webgpu.kernels import autotune
from torch_webgpu.kernels.launch import DeviceCaps
from torch_webgpu.kernels.matmul import (
    EXPERIMENTAL,
    SGMAT_LARGE,
    SGMAT_SKINNY,
    SHIPPING,
    SPLIT_TILES,
    VARIANTS,
    VEC_SUFFIX,
    GemvSpec,
    Layout,
    MatmulProblem,
    SgmatSpec,
    TiledSpec,
    experimental_offered,
    parse_variant,
    plan_matmul_steps,
    variants,
)
from torch_webgpu.kernels.quant_matmul import GEMV, SGMAT, STREAM, TILED

SHIPPING_SPECS = [spec for specs in SHIPPING.values() for spec in specs]
QUANT_SPECS = [*GEMV, *STREAM, *TILED, *SGMAT]


@pytest.mark.parametrize("spec", SHIPPING_SPECS + list(EXPERIMENTAL) + QUANT_SPECS, ids=lambda s: s.name)
def test_every_variant_name_parses_back_to_its_spec(spec):
    """Shipping, experimental and quantized variants alike: name -> spec -> the same name, and the
    vector-load form parses to the same spec."""
    assert parse_variant(spec.name).spec == spec
    assert not parse_variant(spec.name).vec
    vec = parse_variant(spec.name + VEC_SUFFIX)
    assert vec.spec == spec and vec.vec and vec.name == spec.name + VEC_SUFFIX


def test_one_spelling_per_spec():
    """Names that leave a default in, list parts out of order, or name nothing are refused with the
    spelling the spec has."""
    for name, spelled in (("tile64x64.r4x4.k16.db.l4", "tile64x64.r4x4.k16.l4.db"),
                          ("sgmat.w2x2.f2x2.k32.pl1", "sgmat.w2x2.f2x2.k32.pl"),
                          ("gemv.k64n4", "gemv.k64n4.wg"), ("tile64x64.r4x4.k16.s1", "tile64x64.r4x4.k16"),
                          ("sgmat.w2x2.f2x2.k32.pad8", "sgmat.w2x2.f2x2.k32")):
        with pytest.raises(ValueError, match=f"named '{spelled}'"):
            parse_variant(name)
    for name in ("matmul", "tile64", "sgmat.w2x2", "gemv.k8n16.u4.xx", "tile64x64.r4x4.k16.zz"):
        with pytest.raises(ValueError, match=name.split(".")[0]):
            parse_variant(name)


def test_specs_name_every_field():
    """Two specs with different fields never share a name: each field that differs from its default
    appears in the name (here every one set at once, and each alone)."""
    tiled = TiledSpec(64, 64, 16, 4, 4, lds4=True, splits=2, double=True, group=4, pipelined=2, a_rows=True,
                      a_pad=True, out_vec=True, vec_stores=True)
    sgmat = SgmatSpec(4, 4, 2, 4, bk=16, pad=16, group=8, pipelined=3, rotate=True, double=True,
                      order="pairs",
                      plain_b=True, results_rounds=2, out_vec=True, packed=True, pingpong=True)
    for spec in (tiled, sgmat, GemvSpec(8, 16, False, True, 4)):
        assert parse_variant(spec.name).spec == spec
        base = type(spec)(*(getattr(spec, f.name) for f in dataclasses.fields(spec)
                            if f.default is dataclasses.MISSING))
        names = set()
        for f in dataclasses.fields(spec):
            if f.default is dataclasses.MISSING:
                continue
            one = dataclasses.replace(base, **{f.name: getattr(spec, f.name)})
            assert parse_variant(one.name).spec == one, f.name
            names.add(one.name)
        assert len(names) == sum(1 for f in dataclasses.fields(spec) if f.default is not dataclasses.MISSING)


def test_the_catalogue_names_what_the_defaults_name():
    """The default orders (the tensor-core lists, the split-K tiles) name catalogued variants, the
    catalogue has no spec twice, and what is offered when nothing is registered is the shipping list."""
    shipping = {spec.name for spec in SHIPPING_SPECS}
    experimental = {spec.name for spec in EXPERIMENTAL}
    assert len(shipping) == len(SHIPPING_SPECS) and len(experimental) == len(EXPERIMENTAL)
    assert not shipping & experimental
    assert set(SGMAT_LARGE) | set(SGMAT_SKINNY) | set(SPLIT_TILES) <= shipping | experimental
    assert set(SPLIT_TILES) <= shipping
    assert set(VARIANTS) == shipping


def _caps_grid():
    """Devices whose limits are WebGPU's defaults or more, with and without subgroups and tensor cores."""
    for threads, memory, sg, matrices, cpu in itertools.product((256, 1024), (16384, 32768, 49152),
                                                                (None, 32), (False, True), (False, True)):
        if matrices and not sg:
            continue
        features = {"shader-f16"} | ({"subgroups"} if sg else set()) | (
            {"chromium-experimental-subgroup-matrix"} if matrices else set())
        yield DeviceCaps(features=frozenset(features), subgroup_size=sg, cpu=cpu,
                         limits={"max-compute-invocations-per-workgroup": threads,
                                 "max-compute-workgroup-storage-size": memory},
                         subgroup_matrix_configs=(("f16", "f32", 16, 16, 16),) if matrices else ())


def test_experimental_variants_are_never_among_the_autotuners_candidates():
    """Registering the experimental variants changes no problem's first MAX_CANDIDATES (the default and
    what the autotuner times, what a compiled plan carries) on any device of the grid: shipping holds
    every variant that can be one of them."""
    n = autotune.MAX_CANDIDATES
    for caps in _caps_grid():
        for dtype, (m, nn, k), (a_rows, b_rows) in itertools.product(
                ("f32", "f16"), ((1, 768, 768), (16, 256, 64), (197, 768, 768), (512, 512, 2048),
                                 (2048, 2048, 1024)), ((True, True), (True, False), (False, True))):
            a = Layout(0, m * k, k, 1) if a_rows else Layout(0, m * k, 1, m)
            b = Layout(0, k * nn, nn, 1) if b_rows else Layout(0, k * nn, 1, k)
            p = MatmulProblem(1, m, nn, k, a, b, Layout(0, m * nn, nn, 1), dtype=dtype)
            shipping = variants(p, caps)[:n]
            with experimental_offered():
                assert variants(p, caps)[:n] == shipping, (p, caps)


def test_a_cached_winner_the_library_no_longer_names_is_retuned(tmp_path, monkeypatch, caps):
    """Winners are cached by name (autotune.json here, localStorage in torch-webgpu.js): a name from
    before a rename is not a candidate, so it is ignored and the candidates are timed again."""
    monkeypatch.setenv("TORCH_WEBGPU_AUTOTUNE_DIR", str(tmp_path))
    monkeypatch.setenv("TORCH_WEBGPU_AUTOTUNE", "1")
    monkeypatch.setenv("TORCH_WEBGPU_AUTOTUNE_MIN_FLOPS", "0")
    autotune.forget()
    p = MatmulProblem(1, 64, 64, 64, Layout(0, 0, 64, 1), Layout(0, 0, 64, 1), Layout(0, 0, 64, 1))
    names = variants(p, caps)[:3]
    key = autotune.tuning_key("matmul", p, caps)
    (tmp_path / "autotune.json").write_text(json.dumps({key: {"variant": "sgmat.w4x4.f2x4.k32.pl.o4.p16",
                                                              "seconds": {}}}))
    timed = []
    try:
        winner = autotune.choose("matmul", p, caps, names, lambda name: timed.append(name) or len(timed))
    finally:
        autotune.forget()
    assert timed == names and winner == names[0]
    assert json.loads((tmp_path / "autotune.json").read_text())[key]["variant"] == names[0]
    assert plan_matmul_steps(p, caps, winner).steps
