"""Eager torchao weight-only quantized models on the webgpu device: `model.to("webgpu")` keeps torchao's
weight subclasses, their linears run as one quant_matmul dispatch (int8 bytes dequantized in registers)
and match torchao on CPU; what the kernel cannot run goes through torchao's own dequantize + linear."""

from __future__ import annotations

import copy

import pytest
import torch

torchao = pytest.importorskip("torchao")
from torchao.quantization import Int8WeightOnlyConfig, IntxWeightOnlyConfig, quantize_  # noqa: E402
from torchao.quantization.granularity import PerGroup  # noqa: E402

from torch_webgpu.ops import quant_linear  # noqa: E402

from .launch_spy import spy_launches  # noqa: E402

CONFIGS = {"int4g32": lambda: IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32)),
           "int8": Int8WeightOnlyConfig}


@pytest.fixture
def launches(monkeypatch):
    """The names of the quant_matmul launches recorded by the eager linears."""
    return spy_launches(monkeypatch, quant_linear)


def _model(config, dtype):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.ReLU(), torch.nn.Linear(96, 32))
    model = model.to(dtype).eval()
    quantize_(model, CONFIGS[config]())
    return model


@pytest.mark.parametrize("rows", [1, 5])
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_eager_quantized_mlp_matches_torchao(webgpu, launches, config, rows):
    model = _model(config, torch.float32)
    x = torch.randn(rows, 64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = model(x)
        on_device = copy.deepcopy(model).to(webgpu)
        assert type(on_device[0].weight) is type(model[0].weight)
        got = on_device(x.to(webgpu)).cpu()
    torch.testing.assert_close(got, want, atol=1e-3, rtol=0)
    assert len(launches) == 2 and all(n.startswith("qmatmul.i8") for n in launches), launches


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_eager_quantized_mlp_in_float16(webgpu, launches, config):
    from torch_webgpu.ops.library_launch import device_caps

    if not device_caps().shader_f16:
        pytest.skip("the adapter lacks shader-f16")
    model = _model(config, torch.float16)
    x = torch.randn(2, 3, 64, generator=torch.Generator().manual_seed(1)).half()
    with torch.no_grad():
        want = model(x).float()
        got = copy.deepcopy(model).to(webgpu)(x.to(webgpu)).cpu().float()
    torch.testing.assert_close(got, want, atol=1e-2, rtol=1e-2)
    assert len(launches) == 2 and all(".f16." in n for n in launches), launches


def test_unsupported_layout_uses_torchao_dequantize(webgpu, launches):
    """K not a multiple of 8: torchao's dequantize + linear on the device, still correct."""
    torch.manual_seed(0)
    model = torch.nn.Linear(36, 16).eval()
    quantize_(model, Int8WeightOnlyConfig())
    x = torch.randn(3, 36)
    with torch.no_grad():
        want = model(x)
        got = copy.deepcopy(model).to(webgpu)(x.to(webgpu)).cpu()
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    assert launches == []
