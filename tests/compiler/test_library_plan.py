"""Plans of IREE segments and library dispatches (library_plan.py): values IREE folds into shared bytes and
arguments it updates in place keep their meaning across segments."""

import pytest
import torch
import torch.nn as nn

from torch_webgpu.compiler.webgpu_compiler import STATS
from torch_webgpu.plan.format import LowIROp


def _run(fn, *args, atol=1e-4):
    with torch.no_grad():
        want = fn(*args)
        got = torch.compile(fn, backend="webgpu")(*args)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g.float(), w.float(), atol=atol, rtol=atol)
    return STATS.plans[-1]


def _library_dispatches(plan):
    library = set(plan.meta.get("library", {}))
    return [n for n in plan.main if n.op is LowIROp.DISPATCH and n.args["entry_point"] in library]


def _a_operands(plan):
    """The (buffer, offset) each library matmul reads as A (binding 0 of its host bindings)."""
    return [tuple(n.args["bindings"][0][:2]) for n in _library_dispatches(plan)]


def test_equal_segment_outputs_folded_into_one_buffer_feed_two_library_matmuls():
    # Two views of one value, exp'd apart: FX keeps two nodes, IREE folds them into one result buffer.
    def fn(x, w1, w2):
        h = torch.sin(x)
        return torch.exp(h.view(-1, 8)) @ w1, torch.exp(h.view(4, 8)) @ w2
    torch.manual_seed(0)
    plan = _run(fn, torch.randn(4, 8), torch.randn(8, 3), torch.randn(8, 5))
    a0, a1 = _a_operands(plan)
    assert a0 == a1   # the pattern really shares bytes (the plan used to be refused for it)


def test_float16_casts_of_one_value_feed_two_library_matmuls(rt):
    # What f16 BERT's attention projections are: torch's decomposition reads the f16 layer-norm output
    # through one f32 cast per linear; the layer norm (a library rows op) stores f16 that both read.
    if "shader-f16" not in rt.info.features:
        pytest.skip("the adapter lacks shader-f16")
    torch.manual_seed(0)
    norm, q, k = nn.LayerNorm(16).half(), nn.Linear(16, 8).half(), nn.Linear(16, 8).half()

    def fn(x):
        h = norm(x)
        return q(h), k(h)
    plan = _run(fn, torch.randn(6, 16, dtype=torch.float16), atol=2e-2)
    library = plan.meta["library"]
    kinds = sorted(library[n.args["entry_point"]].split(".")[0] for n in _library_dispatches(plan))
    assert kinds == ["matmul", "matmul", "rows"]


def test_segment_updating_its_input_in_place_gets_a_copy_when_the_old_value_is_read_later():
    def fn(cache, idx, x, w, w2):
        new = cache.index_put((idx,), x @ w)   # IREE writes `cache` in place
        z = new @ w2
        return z, cache * z                    # ... and the old `cache` is read after it
    torch.manual_seed(0)
    plan = _run(fn, torch.randn(6, 8), torch.tensor([1, 4]), torch.randn(2, 5), torch.randn(5, 8),
                torch.randn(8, 8))
    copies = [n for n in plan.main if n.op is LowIROp.COPY]
    assert len(copies) == 1 and copies[0].args["source"] == "in0"
    assert len(_library_dispatches(plan)) == 2


def test_segment_updating_a_library_result_in_place_copies_nothing_when_nothing_reads_it_later():
    def fn(a, b, idx, x, w, w2):
        return (torch.relu(a @ b).index_put((idx,), x @ w) @ w2,)   # the relu'd product: written in place
    torch.manual_seed(0)
    plan = _run(fn, torch.randn(6, 4), torch.randn(4, 8), torch.tensor([1, 4]), torch.randn(2, 5),
                torch.randn(5, 8), torch.randn(8, 8))
    assert not [n for n in plan.main if n.op is LowIROp.COPY]
    assert len(_library_dispatches(plan)) == 3


@pytest.mark.parametrize("library", ["1", "0"])
def test_an_input_iree_updates_in_place_is_left_as_the_caller_passed_it(library, monkeypatch):
    monkeypatch.setenv("TORCH_WEBGPU_LIBRARY", library)

    def fn(cache, idx, x, w, w2):
        return cache.index_put((idx,), x @ w) @ w2
    torch.manual_seed(0)
    args = (torch.randn(6, 8), torch.tensor([1, 4]), torch.randn(2, 5), torch.randn(5, 8), torch.randn(8, 8))
    on_device = [t.to("webgpu") for t in args]
    with torch.no_grad():
        got = torch.compile(fn, backend="webgpu")(*on_device)
    torch.testing.assert_close(got.cpu(), fn(*args), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(on_device[0].cpu(), args[0], atol=0, rtol=0)


H200 = "benchmarks/targets/h200-dawn.json"


def test_an_f16_target_with_subgroup_matrices_gives_compiled_matmuls_the_tensor_core_variants():
    from torch_webgpu.bundle.requirements import target_limits
    from torch_webgpu.compiler.export.graph import make_target
    from torch_webgpu.compiler.library_plan import caps_for_target
    from torch_webgpu.kernels.launch import DeviceCaps
    from torch_webgpu.kernels.matmul import Layout, MatmulProblem, variants

    target = make_target(H200, f16=True).iree
    assert ("f16", "f32", 16, 16, 16) in target.subgroup_matrix_configs
    assert not make_target(H200).iree.subgroup_matrix_configs   # f32 bundles: no tensor cores (same key)
    compiled = caps_for_target(target)
    limits, features = target_limits(H200)
    eager = DeviceCaps(features=features, limits=limits, subgroup_size=32,
                       subgroup_matrix_configs=target.subgroup_matrix_configs)   # DeviceCaps.from_runtime's
    for m, n, k in ((128, 768, 3072), (4096, 4096, 4096), (2, 768, 768)):
        p = MatmulProblem(1, m, n, k, Layout(0, m * k, k, 1), Layout(0, k * n, n, 1), Layout(0, m * n, n, 1),
                          dtype="f16")
        assert variants(p, compiled)[0] == variants(p, eager)[0]
    p = MatmulProblem(1, 128, 768, 3072, Layout(0, 0, 3072, 1), Layout(0, 0, 768, 1), Layout(0, 0, 768, 1),
                      dtype="f16")
    assert variants(p, compiled)[0].startswith("sgmat.")


def test_f16_model_bundled_for_the_h200_runs_its_linears_on_tensor_cores(tmp_path, rt):
    from torch_webgpu.compiler.export import graph as ex

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 16)).half().eval()
    target = ex.make_target(H200, f16=True)
    traced = ex.trace(model, [torch.randn(32, 64, dtype=torch.float16)])
    plan = ex.compile_traced(traced, target)
    kinds = [plan.meta["library"][n.args["entry_point"]] for n in _library_dispatches(plan)]
    matmuls = [k for k in kinds if k.startswith("matmul.")]
    assert len(_library_dispatches(plan)) == 3 and len(matmuls) == 2 and all(".sgmat." in k for k in matmuls)
    assert any(k.startswith("rows.layer_norm.f16.") for k in kinds)
    path = ex.write_plan_bundle(plan, traced, target, tmp_path / "b")   # its requirements fit the H200
    import json
    requires = json.loads((path / "manifest.json").read_text())["requires"]
    assert "chromium-experimental-subgroup-matrix" in requires["features"]
    if "shader-f16" in rt.info.features and "subgroups" in rt.info.features:
        # As far as this adapter can check it: every other shader (IREE's, with 32-wide subgroup ops) is
        # valid WGSL for Dawn. The tensor-core ones need the feature this adapter lacks.
        for key, spec in plan.executables.items():
            if "sgmat" not in key:
                rt.kernel(plan.wgsl[spec.wgsl_file], spec.entry_point, label=key)


def test_each_graph_is_imported_into_torch_mlir_once_per_compile(tmp_path, monkeypatch):
    """The whole graph once per compile (its text keys the cache; its ops are checked), and on a cache miss
    the segments the partition cut out of it once more, all in one module (they are other graphs)."""
    from torch_webgpu.compiler import webgpu_compiler

    monkeypatch.setenv("TORCH_WEBGPU_CACHE_DIR", str(tmp_path))
    real = webgpu_compiler.import_graphs
    imported: list[list[str]] = []

    def import_graphs(graphs):
        imported.append([name for _, name in graphs])
        return real(graphs)

    monkeypatch.setattr(webgpu_compiler, "import_graph", lambda gm, name="main": import_graphs([(gm, name)]))
    monkeypatch.setattr(webgpu_compiler, "import_graphs", import_graphs)

    def fn(x, w):
        return (torch.cumsum(x @ w, 1) @ w,)   # matmul, an IREE segment, matmul
    args = (torch.randn(4, 8), torch.randn(8, 8))
    plan = _run(fn, *args)
    assert len(_library_dispatches(plan)) == 2
    assert imported == [["main"], ["seg1"]]
    imported.clear()
    torch._dynamo.reset()
    _run(fn, *args)   # from the disk cache: the whole graph only
    assert imported == [["main"]]
