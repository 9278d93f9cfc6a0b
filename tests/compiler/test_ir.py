"""High IR from FX graphs and the low IR plan's JSON round trip."""

import torch

from torch_webgpu.compiler.fx_import import import_graph, prepare_graph
from torch_webgpu.compiler.high_ir import HighIROp, build_high_ir
from torch_webgpu.plan.format import Plan


def _high_ir(fn, *args):
    gm = torch.fx.experimental.proxy_tensor.make_fx(fn)(*args)
    from mlir_passes.torch_passes import run_high_passes

    module = import_graph(prepare_graph(gm).graph_module)
    run_high_passes(module)
    return build_high_ir(module)


def test_high_ir_nodes_have_ops_shapes_and_folded_scalars():
    graph = _high_ir(lambda x, w: torch.relu(x @ w) * 2.0, torch.randn(4, 8), torch.randn(8, 3))
    ops = [n.op for n in graph.nodes]
    assert HighIROp.MM in ops and HighIROp.RELU in ops
    mm = next(n for n in graph.nodes if n.op is HighIROp.MM)
    assert str(mm.results[0]) == "f32[4, 3]" and mm.operands == ["%arg0", "%arg1"]
    text = str(graph)
    assert text.startswith("graph(%arg0: f32[4, 8], %arg1: f32[8, 3]):") and "aten.mm(%arg0, %arg1)" in text
    graph.check_supported()


def test_none_outputs_and_constants_are_normalised():
    const = torch.arange(6.0)

    def fn(x):
        return x + const, None

    gm = torch.fx.experimental.proxy_tensor.make_fx(fn)(torch.randn(6))
    prepared = prepare_graph(gm)
    assert prepared.output_map == [0, None]
    assert len(prepared.constants) == 1 and torch.equal(prepared.constants[0], const)
    assert not [n for n in prepared.graph_module.graph.nodes if n.op == "get_attr"]


def test_plan_round_trip(tmp_path):
    import os

    os.environ["TORCH_WEBGPU_CACHE_DIR"] = str(tmp_path / "cache")
    from torch_webgpu.compiler.webgpu_compiler import compile_plan

    torch._dynamo.reset()
    args = [torch.randn(4, 8), torch.randn(8, 3)]
    gm = torch.fx.experimental.proxy_tensor.make_fx(lambda x, w: (x @ w,))(*args)
    plan = compile_plan(prepare_graph(gm), [torch.randn(4, 8), torch.randn(8, 3)])
    plan.save(tmp_path / "p")
    again = Plan.load(tmp_path / "p")
    assert str(again) == str(plan)
    assert again.wgsl == plan.wgsl and again.dispatch_count == plan.dispatch_count >= 1
