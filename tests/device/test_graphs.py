"""torch.webgpu graphs (torch_webgpu/graphs.py): capture eager models, replay on new inputs, refusals."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
from torch import nn
from torch.testing import assert_close

from benchmarks.suites.graphs import Block
from torch_webgpu.runtime import GraphCaptureError

_LIB = torch.library.Library("webgpu_graphs_test", "DEF")  # an op with only a CPU kernel (CPU fallback)
_LIB.define("twice(Tensor x) -> Tensor")
_LIB.impl("twice", lambda x: x * 2, "CPU")


def _block() -> nn.Module:
    """The graphs benchmark's pre-norm transformer block, small."""
    return Block(32, 4, mlp_ratio=2)


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 8))


def _conv_net() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(8, 4))


def _capture(fn, *args, warmup: int = 1):
    """(graph, static output) of fn(*args) captured after `warmup` eager runs."""
    for _ in range(warmup):
        fn(*args)
    g = torch.webgpu.WebGPUGraph()
    with torch.webgpu.graph(g):
        out = fn(*args)
    return g, out


MODELS = {"mlp": (_mlp, (4, 16)), "conv": (_conv_net, (2, 3, 12, 12)), "block": (_block, (2, 8, 32))}


@pytest.mark.parametrize("name", list(MODELS))
def test_replay_on_new_inputs_matches_eager_and_cpu(no_fallback, name):
    make, shape = MODELS[name]
    torch.manual_seed(0)
    cpu_model = make().eval()
    model = copy.deepcopy(cpu_model).to(no_fallback)
    static_x = torch.randn(shape).to(no_fallback)
    with torch.no_grad():
        g, static_y = _capture(model, static_x)
        assert g.dispatches > 0
        for seed in (1, 2):
            new = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
            static_x.copy_(new.to(no_fallback))
            g.replay()
            got = static_y.cpu()
            assert_close(got, cpu_model(new), rtol=1e-4, atol=1e-4)
            assert_close(got, model(static_x).cpu(), rtol=1e-5, atol=1e-5)   # eager on the same input


def test_python_replay_matches_native(no_fallback, monkeypatch):
    torch.manual_seed(0)
    model = _mlp().eval().to(no_fallback)
    x = torch.randn(4, 16).to(no_fallback)
    with torch.no_grad():
        native, y_native = _capture(model, x)
        monkeypatch.setenv("TORCH_WEBGPU_EXECUTOR", "python")
        python, y_python = _capture(model, x)
        assert not python.native
        x.copy_(torch.randn(4, 16).to(no_fallback))
        native.replay()
        python.replay()
        assert_close(y_native.cpu(), y_python.cpu(), rtol=0, atol=0)
        assert_close(y_python.cpu(), model(x).cpu(), rtol=0, atol=0)


def test_replay_sees_in_place_parameter_updates(no_fallback):
    torch.manual_seed(0)
    model = _mlp().eval().to(no_fallback)
    x = torch.randn(4, 16).to(no_fallback)
    with torch.no_grad():
        g, y = _capture(model, x, warmup=0)   # no warm-up needed: capture runs the work too
        model[0].weight.mul_(0.5)
        model[4].bias.add_(1.0)
        g.replay()
        assert_close(y.cpu(), model(x).cpu(), rtol=1e-5, atol=1e-5)


def test_captured_memory_survives_freed_temporaries(no_fallback):
    held_before = torch.webgpu.memory_stats()["graph_held"]   # other tests' graphs may still be alive
    x = torch.linspace(-2, 2, 1024).to(no_fallback)

    def fn(x):
        t = x * 3.0        # temporaries, freed inside the capture
        u = torch.relu(t) + 1.0
        return u * x

    g, y = _capture(fn, x)
    del x  # the static input too: only the graph holds it now
    # New allocations of the same sizes must not take the graph's buffers.
    others = [torch.full((1024,), 7.0, device=no_fallback) for _ in range(8)]
    g.replay()
    want = fn(torch.linspace(-2, 2, 1024))
    assert_close(y.cpu(), want)
    for o in others:
        assert_close(o.cpu(), torch.full((1024,), 7.0))
    del y
    held = torch.webgpu.memory_stats()["graph_held"] - held_before
    assert held >= 4 * 4096   # t, u, x and y: freed, held for g
    g.reset()
    assert g.dispatches == 0
    with pytest.raises(GraphCaptureError, match="holds no capture"):
        g.replay()
    assert torch.webgpu.memory_stats()["graph_held"] == held_before   # reset gives them back to the pool


def test_replayed_ops_do_not_take_the_buffers_a_graph_holds(no_fallback):
    # A freed static input goes to C++'s recycling of freed ids; replayed eager ops of its size must not
    # get it back while the graph pins it.
    z = torch.linspace(0, 1, 1024).to(no_fallback)
    torch.relu(z), torch.relu(z)   # planned: later calls replay
    x = torch.linspace(-2, 2, 1024).to(no_fallback)
    g, y = _capture(lambda x: x * 3.0 + 1.0, x)
    del x
    others = [torch.relu(z) for _ in range(4)]
    g.replay()
    assert_close(y.cpu(), torch.linspace(-2, 2, 1024) * 3.0 + 1.0)
    for o in others:
        assert_close(o.cpu(), torch.linspace(0, 1, 1024))
    g.reset()


def test_reset_allows_a_new_capture_and_status_query(no_fallback):
    x = torch.ones(8, device=no_fallback)
    g = torch.webgpu.WebGPUGraph()
    assert not torch.webgpu.is_current_stream_capturing()
    with torch.webgpu.graph(g):
        assert torch.webgpu.is_current_stream_capturing()
        y = x + 1
        with pytest.raises(GraphCaptureError, match="do not nest"):
            torch.webgpu.graph(torch.webgpu.WebGPUGraph()).__enter__()
    assert not torch.webgpu.is_current_stream_capturing()
    with pytest.raises(GraphCaptureError, match="already holds a capture"):
        g.capture_begin()
    g.reset()
    with torch.webgpu.graph(g):
        y = x * 5
    x.fill_(2.0)
    g.replay()
    assert_close(y.cpu(), torch.full((8,), 10.0))


def _reading(x):
    return (x + 1).cpu()


def _item(x):
    return (x.sum() + 1).item()


def _synchronize(x):
    y = x + 1
    torch.webgpu.synchronize()
    return y


def _upload(x):
    return x.copy_(torch.ones(x.shape))


def _data_dependent(x):
    return torch.nonzero(x > 0)


def _random(x):
    return x + torch.randn(x.shape, device=x.device)


def _dropout(x):
    return nn.functional.dropout(x, 0.5, training=True)


def _fallback(x):
    return torch.ops.webgpu_graphs_test.twice(x)


REFUSALS = {
    _reading: "reads device data back.*after g.replay",
    _item: "reads device data back.*item",
    _synchronize: "waits for the GPU.*synchronize",
    _upload: "uploads new host data.*x.copy_",
    _data_dependent: "data-dependent output shape",
    _random: "random numbers.*repeat",
    _dropout: "random numbers.*eval mode",
    _fallback: "'webgpu_graphs_test::twice' through the CPU fallback",
}


@pytest.mark.parametrize("fn", list(REFUSALS), ids=lambda f: f.__name__.strip("_"))
def test_capture_refuses_what_a_replay_cannot_repeat(webgpu, fn):
    x = torch.linspace(-1, 1, 16, device=webgpu)
    g = torch.webgpu.WebGPUGraph()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # the CPU fallback's first-use warning
        with pytest.raises(GraphCaptureError, match=REFUSALS[fn]), torch.webgpu.graph(g):
            fn(x)
    assert not torch.webgpu.is_current_stream_capturing()
    assert g.dispatches == 0
    assert_close((x * 2).cpu(), torch.linspace(-2, 2, 16))   # eager work goes on normally afterwards


def test_make_graphed_callables_module_and_function(no_fallback):
    torch.manual_seed(0)
    cpu_model = _mlp().eval()
    model = copy.deepcopy(cpu_model).to(no_fallback)
    x = torch.randn(4, 16).to(no_fallback)
    with torch.no_grad():
        graphed_model, graphed_fn = torch.webgpu.make_graphed_callables(
            (model, lambda a: torch.sigmoid(a) * 2), ((x,), (x,)), num_warmup_iters=1)
        assert graphed_model is model
        new = torch.randn(4, 16)
        assert_close(model(new.to(no_fallback)).cpu(), cpu_model(new), rtol=1e-4, atol=1e-4)
        assert_close(graphed_fn(new.to(no_fallback)).cpu(), torch.sigmoid(new) * 2)
        with pytest.raises(ValueError, match="shapes are frozen"):
            graphed_fn(torch.randn(2, 16).to(no_fallback))


def test_make_graphed_callables_is_forward_only(no_fallback):
    model = _mlp().to(no_fallback)
    x = torch.randn(4, 16).to(no_fallback)
    with pytest.raises(NotImplementedError, match="forward pass only.*no_grad"):
        torch.webgpu.make_graphed_callables(model, (x,))


def test_replay_inside_profile_times_every_captured_dispatch(no_fallback):
    from torch_webgpu.device_state import runtime

    torch.manual_seed(0)
    model = _mlp().eval().to(no_fallback)
    x = torch.randn(4, 16).to(no_fallback)
    with torch.no_grad():
        g, y = _capture(model, x)
        with runtime().profile() as timings:
            g.replay()
        assert len(timings) == g.dispatches
        assert any(t.label.startswith("matmul") for t in timings)
        assert_close(y.cpu(), model(x).cpu(), rtol=1e-5, atol=1e-5)
