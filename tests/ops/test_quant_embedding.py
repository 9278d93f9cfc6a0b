"""Eager torchao-quantized embeddings on the webgpu device: the lookup runs as one quant_embedding
dispatch (only the gathered rows dequantized) and matches torchao on CPU; what the kernel cannot run
goes through torchao's own dequantize + embedding."""

from __future__ import annotations

import copy

import pytest
import torch

torchao = pytest.importorskip("torchao")
from torchao.quantization import Int8WeightOnlyConfig, IntxWeightOnlyConfig, quantize_  # noqa: E402
from torchao.quantization.granularity import PerAxis, PerGroup  # noqa: E402

from torch_webgpu.ops import quant_embedding  # noqa: E402

from .launch_spy import spy_launches  # noqa: E402

CONFIGS = {"int4g32": lambda: IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32)),
           "int8axis": lambda: IntxWeightOnlyConfig(weight_dtype=torch.int8, granularity=PerAxis(0)),
           "int8": Int8WeightOnlyConfig}


@pytest.fixture
def launches(monkeypatch):
    """The names of the quant_embedding launches recorded by the eager lookups."""
    return spy_launches(monkeypatch, quant_embedding)


def _table(config, dtype, rows=100, dim=64):
    torch.manual_seed(0)
    model = torch.nn.Embedding(rows, dim).to(dtype).eval()
    quantize_(model, CONFIGS[config](), filter_fn=lambda m, fqn: isinstance(m, torch.nn.Embedding))
    return model


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_eager_quantized_embedding_matches_torchao(webgpu, launches, config, dtype):
    from torch_webgpu.ops.library_launch import device_caps

    if dtype == torch.float16 and not device_caps().shader_f16:
        pytest.skip("the adapter lacks shader-f16")
    model = _table(config, dtype)
    ids = torch.tensor([[0, 5, 99], [7, 7, 42]])
    with torch.no_grad():
        want = model(ids)
        on_device = copy.deepcopy(model).to(webgpu)
        assert type(on_device.weight) is type(model.weight)
        got = on_device(ids.to(webgpu)).cpu()
    assert got.dtype == dtype
    torch.testing.assert_close(got, want, atol=0, rtol=0)
    assert len(launches) == 1 and launches[0].startswith("qembedding.i8"), launches


def test_unsupported_dim_uses_torchao_dequantize(webgpu, launches):
    """dim not a multiple of 8: torchao's dequantize + embedding on the device, still correct."""
    model = _table("int8", torch.float32, dim=36)
    ids = torch.tensor([3, 1, 4])
    with torch.no_grad():
        want = model(ids)
        got = copy.deepcopy(model).to(webgpu)(ids.to(webgpu)).cpu()
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-6)
    assert launches == []
