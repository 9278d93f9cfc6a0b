"""Compiled plans run matmuls (with their epilogues) as kernel-library dispatches, IREE the rest."""

import copy

import pytest
import torch
import torch.nn as nn

import torch_webgpu
from torch_webgpu.compiler.webgpu_compiler import STATS
from torch_webgpu.plan.format import LowIROp

from .models import MLP, TransformerBlock


def _compile_and_check(model, *inputs, device="cpu", **options):
    """Run `model` compiled and eager; returns the (last) compiled plan."""
    with torch.no_grad():
        expected = model(*inputs)
        if device != "cpu":
            model = copy.deepcopy(model).to(device)
            inputs = tuple(x.to(device) for x in inputs)
        got = torch.compile(model, backend="webgpu", **options)(*inputs)
    assert got.device.type == device
    torch.testing.assert_close(got.cpu(), expected, atol=1e-4, rtol=1e-4)
    return STATS.plans[-1]


def _kinds(plan):
    """(library dispatches, IREE dispatches) of one call of `plan`."""
    library = set(plan.meta.get("library", {}))
    entries = [n.args["entry_point"] for n in plan.main if n.op is LowIROp.DISPATCH]
    return sum(e in library for e in entries), sum(e not in library for e in entries)


@pytest.mark.parametrize("device", ["cpu", "webgpu"])
def test_mlp_is_two_library_matmuls_with_fused_bias_and_relu(device):
    torch.manual_seed(0)
    plan = _compile_and_check(MLP(), torch.randn(4, 16), device=device)
    # Weights are read through their transposed strides, bias and ReLU are epilogues: nothing for IREE.
    assert _kinds(plan) == (2, 0)
    assert all(v.startswith("matmul.f32.") for v in plan.meta["library"].values())


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_linear_gelu_on_3d_input_is_one_dispatch(approximate):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(24, 40), nn.GELU(approximate=approximate))
    plan = _compile_and_check(model, torch.randn(2, 5, 24))
    assert _kinds(plan) == (1, 0)


def test_scale_bias_residual_and_batched_transposed_operands():
    def fn(x, y, w, r):
        scores = (x @ y.transpose(-2, -1)) * 0.25      # bmm, B transposed, scale
        return torch.tanh(scores @ w + 0.5) + r         # bmm, bias, activation, residual
    torch.manual_seed(0)
    x, y, w, r = torch.randn(3, 7, 16), torch.randn(3, 9, 16), torch.randn(9, 5), torch.randn(3, 7, 5)
    plan = _compile_and_check(fn, x, y, w, r)
    library, _ = _kinds(plan)
    assert library == 2


@pytest.mark.slow
@pytest.mark.parametrize("device", ["cpu", "webgpu"])
def test_transformer_block(device):
    torch.manual_seed(0)
    plan = _compile_and_check(TransformerBlock(), torch.randn(2, 8, 32), device=device)
    library, iree = _kinds(plan)
    assert library == 7 and iree > 0   # qkv, proj, fc1, fc2, attention, 2 norms; split, GELU: IREE
    entries = [n.args["entry_point"] for n in plan.main if n.op is LowIROp.DISPATCH]
    assert sum(plan.meta["library"].get(e, "").startswith("attention.") for e in entries) == 1
    assert plan.meta["segments"] >= 1


def test_library_switch_off_compiles_everything_with_iree(monkeypatch):
    monkeypatch.setenv("TORCH_WEBGPU_LIBRARY", "0")
    torch.manual_seed(0)
    plan = _compile_and_check(MLP(), torch.randn(4, 16))
    assert _kinds(plan)[0] == 0 and "library" not in plan.meta


def test_dynamic_shapes_stay_with_iree():
    torch.manual_seed(0)
    model = MLP()
    compiled = torch.compile(model, backend="webgpu", dynamic=True)
    with torch.no_grad():
        for batch in (3, 6):
            x = torch.randn(batch, 16)
            torch.testing.assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)
    assert _kinds(STATS.plans[-1])[0] == 0


def test_training_backward_graphs_use_the_library():
    torch.manual_seed(0)
    eager = MLP()
    model = copy.deepcopy(eager)
    compiled = torch.compile(model, backend="webgpu")
    x, target = torch.randn(4, 16), torch.randn(4, 8)
    for m in (eager, compiled):
        torch.nn.functional.mse_loss(m(x), target).backward()
    for pe, pc in zip(eager.parameters(), model.parameters(), strict=True):
        torch.testing.assert_close(pc.grad, pe.grad, atol=1e-4, rtol=1e-4)
    backward = STATS.plans[-1]
    assert _kinds(backward)[0] >= 2   # grad_input and grad_weight matmuls


def test_dump_dir_lists_library_and_iree_dispatches(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_WEBGPU_DUMP_DIR", str(tmp_path))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8), nn.Linear(8, 4), nn.Hardswish())
    _compile_and_check(model, torch.randn(3, 8))
    (listing,) = tmp_path.glob("graph_*/dispatches.txt")
    kinds = [line.split("\t")[0] for line in listing.read_text().splitlines()]
    assert sum(k.startswith("library:matmul.f32.") for k in kinds) == 2 and "iree" in kinds
    assert sum(k.startswith("library:rows.layer_norm.") for k in kinds) == 1


def test_bundle_round_trip_carries_library_dispatches(tmp_path):
    torch.manual_seed(0)
    model, x = MLP().eval(), torch.randn(4, 16)
    path = torch_webgpu.export(model, [x], tmp_path / "mlp", target="webgpu-core")
    bundle = torch_webgpu.load(path)
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(bundle(x.numpy())), model(x), atol=1e-4, rtol=1e-4)
    assert any(k.startswith("lib_matmul") for k in bundle.plan.executables)


def test_matmul_results_returned_as_is_as_strided_views_and_shared():
    def fn(x, w, v):
        y = x @ w
        return y, y.t(), torch.relu(y) @ v, (x @ w)[1:3]
    torch.manual_seed(0)
    x, w, v = torch.randn(6, 8), torch.randn(8, 5), torch.randn(5, 4)
    with torch.no_grad():
        got = torch.compile(fn, backend="webgpu")(x, w, v)
    for g, e in zip(got, fn(x, w, v), strict=True):
        torch.testing.assert_close(g, e, atol=1e-4, rtol=1e-4)
    assert _kinds(STATS.plans[-1])[0] >= 2


def test_integer_matmul_stays_with_iree():
    def fn(a, b):
        return a @ b
    a, b = torch.randint(-5, 5, (4, 6), dtype=torch.int32), torch.randint(-5, 5, (6, 3), dtype=torch.int32)
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(fn, backend="webgpu")(a, b), fn(a, b))
    assert _kinds(STATS.plans[-1]) == (0, 1)
