"""The harness checks each GPU figure against torch CPU before timing it, and keeps to a time budget."""

import time

import torch

from benchmarks.backends import TorchBackend, available_torch_backends
from benchmarks.harness import Settings, dispatch_kind, time_figure


class _Scale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(8))

    def forward(self, x):
        return x * self.w


def _eager():
    [backend] = available_torch_backends(["webgpu-eager"])
    return backend


def _inputs(backend):
    torch.manual_seed(0)
    return _Scale().eval().to(backend.device), (torch.randn(4, 8).to(backend.device),)


def test_a_matching_figure_is_timed():
    settings = Settings(smoke=True)
    backend = _eager()
    module, args = _inputs(backend)
    with torch.no_grad():
        times = time_figure(settings, backend, "micro", "scale", module, "scale", args)
    assert times and settings.failures == []


def test_a_wrong_output_is_not_timed():
    eager = _eager()
    wrong = TorchBackend("webgpu-eager", "webgpu", lambda fn, key="": (lambda *a: fn(*a) + 1.0),
                         eager.synchronize)
    settings = Settings(smoke=True)
    module, args = _inputs(wrong)
    with torch.no_grad():
        assert time_figure(settings, wrong, "micro", "scale", module, "scale", args) is None
    [failure] = settings.failures
    assert "differs from torch CPU" in failure.error and failure.name == "scale"


def test_figures_past_the_budget_are_listed_as_skipped():
    settings = Settings(smoke=True, deadline=time.monotonic() - 1)
    backend = _eager()
    module, args = _inputs(backend)
    assert time_figure(settings, backend, "micro", "scale", module, "scale", args) is None
    assert [f.error for f in settings.failures] == ["skipped: time budget spent"]


def test_only_measures_the_matching_figures():
    settings = Settings(smoke=True, only="f16 decode")
    assert settings.wants("Llama-3.2-1B f16 decode (KV cache 2048)") and not settings.wants("scale")
    backend = _eager()
    module, args = _inputs(backend)
    assert time_figure(settings, backend, "micro", "scale", module, "scale", args) is None
    assert settings.failures == []   # left out on purpose, not a failure


def test_dispatch_kinds():
    assert dispatch_kind("matmul.f32.tile64x64.r4x4") == "library"
    assert dispatch_kind("reduce.sum.f32.pass2") == "library"
    assert dispatch_kind("lib_matmul_f32_tile64x64_r4x4_0123456789") == "library"   # in a compiled plan
    assert dispatch_kind("main$async_dispatch_48_conv_512x7x7x512x3x3_f32") == "iree"
    assert dispatch_kind("torch-webgpu-widen-int32") == "other"


class _Sum(torch.nn.Module):
    def forward(self, a):
        return a.sum()


def test_a_full_reduction_is_checked_against_the_magnitudes_summed():
    settings = Settings(smoke=True)
    backend = _eager()
    x = (torch.randn(1 << 16) + 0.5).to(backend.device)
    assert time_figure(settings, backend, "micro", "sum", _Sum(), "sum", (x,)) is not None
    assert settings.failures == []
