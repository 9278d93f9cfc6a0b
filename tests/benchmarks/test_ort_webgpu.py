"""ONNX Runtime's WebGPU EP as a benchmark peer: exported on this machine, checked against torch CPU."""

import numpy as np
import pytest
import torch

from benchmarks import ort_webgpu

# The dynamo ONNX exporter takes ~5-10 s per model here: slow, not model-sized.
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not ort_webgpu.available(),
                                                    reason="needs onnxruntime-webgpu, onnx and onnxscript")]


class _Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 8)

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.fc1(x)))


class _DiffersWhenExported(torch.nn.Module):
    """Traces to `2 * x` but runs eagerly as `x`: what the check before timing must catch."""

    def forward(self, x):
        return x * 2.0 if torch.compiler.is_exporting() else x + 0.0


def test_backend_times_a_model_only_where_host_io_is_asked_for():
    from benchmarks.backends import available_torch_backends
    from benchmarks.harness import Settings, time_figure

    assert available_torch_backends(["ort-webgpu"]) == []
    [backend] = available_torch_backends(["ort-webgpu"], host_io=True)
    assert (backend.device, backend.size_class) == ("cpu", "webgpu")
    settings = Settings(smoke=True)
    torch.manual_seed(0)
    with torch.no_grad():
        times = time_figure(settings, backend, "models", "MLP", _Mlp().eval(), "model-MLP",
                            (torch.randn(4, 16),))
    assert settings.failures == [] and times and all(t > 0 for t in times)


def test_runs_on_webgpu_and_matches_torch():
    torch.manual_seed(0)
    model = _Mlp().eval()
    x = torch.randn(4, 16)
    fn = ort_webgpu.ORTWebGPUFunction(model, "mlp")
    out = fn(x)
    assert fn.session.get_providers()[0] == "WebGpuExecutionProvider"
    with torch.no_grad():
        np.testing.assert_allclose(out[0], model(x).numpy(), rtol=1e-4, atol=1e-5)
    # Later calls reuse the session: the second call's inputs are not those of the export.
    y = torch.randn(4, 16)
    with torch.no_grad():
        np.testing.assert_allclose(fn(y)[0], model(y).numpy(), rtol=1e-4, atol=1e-5)


def test_a_wrong_result_fails_before_timing():
    fn = ort_webgpu.ORTWebGPUFunction(_DiffersWhenExported().eval(), "differs")
    with pytest.raises(AssertionError, match="differs from torch CPU"):
        fn(torch.randn(8) + 3.0)
    assert fn.session is None
