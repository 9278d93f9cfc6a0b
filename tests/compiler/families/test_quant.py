"""torchao weight-only quantized models through torch.compile: the dequantize + matmul patterns become
quant_matmul library dispatches and match torchao's own CPU result (int4 per-group, int8 per-channel;
f32 and f16 activations; an MLP and a tiny Llama)."""

from __future__ import annotations

import pytest
import torch

from torch_webgpu.compiler.webgpu_compiler import STATS, webgpu_backend
from torch_webgpu.plan.format import LowIROp

torchao = pytest.importorskip("torchao")
from torchao.quantization import Int8WeightOnlyConfig, IntxWeightOnlyConfig, quantize_  # noqa: E402
from torchao.quantization.granularity import PerGroup  # noqa: E402

CONFIGS = {
    "int4g32": lambda: IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32)),
    "int4g128": lambda: IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(128)),
    "int8": Int8WeightOnlyConfig,
}


def mlp(dtype: torch.dtype) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64)).to(dtype)


def quantized(model: torch.nn.Module, config: str) -> torch.nn.Module:
    quantize_(model, CONFIGS[config]())
    return model.eval()


def library_kinds() -> list[str]:
    """The library variant of each dispatch of the last compiled plan that runs one."""
    plan = STATS.plans[-1]
    library = plan.meta.get("library", {})
    return [library[n.args["entry_point"]] for n in plan.main
            if n.op is LowIROp.DISPATCH and n.args["entry_point"] in library]


def check(model, x, atol, rtol=0.0):
    with torch.no_grad():
        want = model(x)
        got = torch.compile(model, backend=webgpu_backend)(x)
    torch.testing.assert_close(got.float(), want.float(), atol=atol, rtol=rtol)


@pytest.mark.parametrize("rows", [1, 9])
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_mlp_f32_matches_torchao(config, rows):
    model = quantized(mlp(torch.float32), config)
    check(model, torch.randn(rows, 128, generator=torch.Generator().manual_seed(1)), atol=1e-3)
    kinds = library_kinds()
    assert len(kinds) == 2 and all(k.startswith("qmatmul.i8") for k in kinds), kinds   # bytes as stored
    assert STATS.plans[-1].meta["segments"] == 0    # bias and ReLU are the kernel's epilogue


@pytest.mark.parametrize("config", ["int4g32", "int8"])
def test_mlp_f16_matches_torchao(config, rt):
    if "shader-f16" not in rt.info.features:
        pytest.skip("the adapter lacks shader-f16")
    model = quantized(mlp(torch.float16), config)
    check(model, torch.randn(3, 4, 128, generator=torch.Generator().manual_seed(1)).half(), atol=1e-2,
          rtol=1e-2)
    kinds = library_kinds()
    assert len(kinds) == 2 and all(k.startswith("qmatmul") and ".f16" in k for k in kinds), kinds


def _llama(dtype):
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
                                      max_position_embeddings=128)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).to(dtype).eval()


@pytest.mark.slow
@pytest.mark.parametrize("config", ["int4g32", "int8"])
def test_tiny_llama_matches_torchao(config):
    model = quantized(_llama(torch.float32), config)
    ids = torch.randint(0, 256, (1, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = model(ids).logits
        got = torch.compile(model, backend=webgpu_backend)(ids).logits
    torch.testing.assert_close(got, want, atol=1e-3, rtol=1e-3)
    kinds = library_kinds()
    # q, k, v, o, gate, up, down per layer and the LM head
    assert sum(k.startswith("qmatmul") for k in kinds) == 15, kinds


def test_int8_tensors_never_reach_iree(monkeypatch):
    """IREE keeps one i32 per int8 element here but sizes buffers per byte: refused, not wrong."""
    monkeypatch.setenv("TORCH_WEBGPU_LIBRARY", "0")
    q = torch.randint(-8, 8, (64, 32), dtype=torch.int8)
    with pytest.raises(Exception, match="int8|si8"):
        torch.compile(lambda q, s: q.float() * s, backend=webgpu_backend)(q, torch.randn(64, 1))
