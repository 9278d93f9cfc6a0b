"""torchao-quantized embedding tables through torch.compile: embedding(dequantize_affine(table), ids)
becomes one quant_embedding library dispatch that gathers rows from the int8 / int4 table, so the plan
never holds the float table; the results match torchao's CPU output (a lone table, and a tiny Llama with
quantized embedding, LM head and linears, the ExecuTorch recipe)."""

from __future__ import annotations

import pytest
import torch

from torch_webgpu.compiler.webgpu_compiler import STATS, webgpu_backend
from torch_webgpu.plan.format import LowIROp

torchao = pytest.importorskip("torchao")
from torchao.quantization import Int8WeightOnlyConfig, IntxWeightOnlyConfig, quantize_  # noqa: E402
from torchao.quantization.granularity import PerAxis, PerGroup  # noqa: E402

TABLES = {"int4g32": lambda: IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32)),
          "int8axis": lambda: IntxWeightOnlyConfig(weight_dtype=torch.int8, granularity=PerAxis(0)),
          "int8": Int8WeightOnlyConfig}


def _is_table(module: torch.nn.Module, fqn: str) -> bool:
    return isinstance(module, torch.nn.Embedding)


def dispatch_kinds() -> list[str]:
    """Each dispatch of the last compiled plan: its library variant, or "iree:" and its entry point."""
    plan = STATS.plans[-1]
    library = plan.meta.get("library", {})
    return [library.get(n.args["entry_point"], "iree:" + n.args["entry_point"]) for n in plan.main
            if n.op is LowIROp.DISPATCH]


def largest_buffer() -> int:
    """Bytes of the largest intermediate buffer of the last compiled plan."""
    return max(int(v) for v in STATS.plans[-1].buffers.values())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("config", sorted(TABLES))
def test_quantized_table_matches_torchao(config, dtype, rt):
    if dtype == torch.float16 and "shader-f16" not in rt.info.features:
        pytest.skip("the adapter lacks shader-f16")
    torch.manual_seed(0)
    model = torch.nn.Embedding(512, 64).to(dtype).eval()
    quantize_(model, TABLES[config](), filter_fn=_is_table)
    ids = torch.randint(0, 512, (2, 5), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = model(ids)
        got = torch.compile(model, backend=webgpu_backend)(ids)
    assert got.dtype == dtype
    torch.testing.assert_close(got, want, atol=0, rtol=0)
    kinds = dispatch_kinds()
    assert kinds == [kinds[0]] and kinds[0].startswith("qembedding.i8"), kinds   # the gather alone
    assert largest_buffer() < 512 * 64 * 2   # no dequantized table


def _llama():
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
                                      max_position_embeddings=128, tie_word_embeddings=True)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


def quantize_like_executorch(model: torch.nn.Module, weights: str) -> torch.nn.Module:
    """Every linear (LM head included) and the token table: int4 group 32 both, or int8 per-channel."""
    if weights == "int4g32":
        quantize_(model, TABLES["int4g32"](),
                  filter_fn=lambda m, fqn: isinstance(m, (torch.nn.Linear, torch.nn.Embedding)))
    else:
        quantize_(model, Int8WeightOnlyConfig())
        quantize_(model, TABLES["int8axis"](), filter_fn=_is_table)
    return model


@pytest.mark.slow
@pytest.mark.parametrize("weights", ["int4g32", "int8"])
def test_tiny_llama_with_quantized_table_and_head_matches_torchao(weights):
    model = quantize_like_executorch(_llama(), weights)
    assert type(model.lm_head.weight).__name__ != "Parameter"   # the (tied) head is quantized too
    ids = torch.randint(0, 256, (1, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = model(ids).logits
        got = torch.compile(model, backend=webgpu_backend)(ids).logits
    torch.testing.assert_close(got, want, atol=1e-3, rtol=1e-3)
    kinds = dispatch_kinds()
    assert sum(k.startswith("qembedding") for k in kinds) == 1, kinds
    # q, k, v, o, gate, up, down per layer and the LM head
    assert sum(k.startswith("qmatmul") for k in kinds) == 15, kinds
    assert largest_buffer() < 256 * 64 * 4   # neither the table nor the head is dequantized


def test_dynamic_shapes_refuse_quantized_tables_clearly():
    """dynamic=True plans are IREE's alone, which cannot read int8 tables: a named error, not a wrong
    result."""
    torch.manual_seed(0)
    model = torch.nn.Embedding(64, 32).eval()
    quantize_(model, TABLES["int4g32"](), filter_fn=_is_table)
    with pytest.raises(Exception, match="embedding, static shapes"):
        torch.compile(model, backend=webgpu_backend, dynamic=True)(torch.tensor([[1, 2, 3]]))
