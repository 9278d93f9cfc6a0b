"""Decoder language-model architectures from transformers (tiny random configs) compile and match CPU
(issue 14) in f32 and f16, with a left-padding attention mask, with dynamic=False (all of them) and
dynamic=True (one of each way shapes reach the plan, DYNAMIC_ARCHITECTURES): the
slice-to-the-end sentinels every `x[..., a:]` produces, graphs that return a lifted constant as it is
(Mistral), and the ±FLT_MAX masks of sliding-window attention (Gemma2)."""

import pytest
import torch
import transformers

from torch_webgpu.compiler.webgpu_compiler import STATS, webgpu_backend

COMMON = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              vocab_size=256, max_position_embeddings=128)
ARCHITECTURES = {
    "llama": ("LlamaForCausalLM", "LlamaConfig", dict(num_key_value_heads=2)),
    "qwen2": ("Qwen2ForCausalLM", "Qwen2Config", dict(num_key_value_heads=2)),
    "qwen3": ("Qwen3ForCausalLM", "Qwen3Config", dict(num_key_value_heads=2, head_dim=16)),
    "mistral": ("MistralForCausalLM", "MistralConfig", dict(num_key_value_heads=2)),
    "phi3": ("Phi3ForCausalLM", "Phi3Config", dict(num_key_value_heads=2, pad_token_id=0, eos_token_id=0)),
    "gemma": ("GemmaForCausalLM", "GemmaConfig", dict(num_key_value_heads=2, head_dim=16)),
    "gemma2": ("Gemma2ForCausalLM", "Gemma2Config",
               dict(num_key_value_heads=2, head_dim=16, sliding_window=8)),
    "gpt_neox": ("GPTNeoXForCausalLM", "GPTNeoXConfig", {}),
    "opt": ("OPTForCausalLM", "OPTConfig", dict(ffn_dim=128, word_embed_proj_dim=64)),
    "falcon": ("FalconForCausalLM", "FalconConfig", {}),
    "gpt2": ("GPT2LMHeadModel", "GPT2Config", dict(n_inner=128, bos_token_id=0, eos_token_id=0)),
}
PAD = 3   # left padding of the second row in the masked tests


def _model(name: str) -> torch.nn.Module:
    model_cls, config_cls, extra = ARCHITECTURES[name]
    config = getattr(transformers, config_cls)(**{**COMMON, **extra})
    torch.manual_seed(0)
    return getattr(transformers, model_cls)(config).eval()


def _padded_batch(length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids (2, length) and their attention mask, the second row left-padded by PAD tokens."""
    ids = torch.randint(0, 256, (2, length), generator=torch.Generator().manual_seed(length))
    mask = torch.ones(2, length, dtype=torch.long)
    mask[1, :PAD] = 0
    return ids, mask


def _unpadded(logits: torch.Tensor) -> list[torch.Tensor]:
    """The logits of the positions the mask keeps (a fully masked query row is undefined)."""
    return [logits[0], logits[1, PAD:]]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_architecture_compiles_and_matches_cpu(name):
    model = _model(name)
    ids = torch.randint(0, 256, (1, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = model(ids).logits
        got = torch.compile(model, backend=webgpu_backend)(ids).logits
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


class _ReturnsBuffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.arange(6.0).reshape(2, 3))

    def forward(self, x):
        return x * 2, self.table + 1


@pytest.mark.parametrize("device", ["cpu", "webgpu"])
def test_graph_returning_a_registered_buffer(device):
    model, x = _ReturnsBuffer().to(device), torch.randn(2, 3)
    doubled, table = torch.compile(model, backend=webgpu_backend)(x.to(device))
    assert table.device.type == device   # as eager: the buffer itself
    torch.testing.assert_close(doubled.cpu(), x * 2)
    torch.testing.assert_close(table.cpu(), torch.arange(6.0).reshape(2, 3) + 1)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_architecture_with_padding_mask_in_float16_matches_cpu(name, rt):
    if "shader-f16" not in rt.info.features:
        pytest.skip("the adapter lacks shader-f16")
    model = _model(name).half()
    ids, mask = _padded_batch(10)
    with torch.no_grad():
        want = model(ids, attention_mask=mask, use_cache=False).logits.float()
        got = torch.compile(model, backend=webgpu_backend)(ids, attention_mask=mask, use_cache=False)
    torch.testing.assert_close(_unpadded(got.logits.float()), _unpadded(want), atol=2e-2, rtol=2e-2)
    # The projections ran as f16 library matmuls, not as f32 after an upcast.
    assert any(v.startswith("matmul.f16.") for v in STATS.plans[-1].meta.get("library", {}).values())


# dynamic=True on the architectures whose shapes reach the plan in different ways (learned positions;
# positions from the mask's cumulative sum; sliding-window +-FLT_MAX masks and soft-capping; rotary
# positions with q/k norms and grouped KV heads); every architecture runs masked with dynamic=False above.
DYNAMIC_ARCHITECTURES = ["gpt2", "opt", "gemma2", "qwen3"]


@pytest.mark.slow
@pytest.mark.parametrize("name", DYNAMIC_ARCHITECTURES)
def test_architecture_with_padding_mask_and_dynamic_lengths_matches_cpu(name):
    # One graph for two sequence lengths: the lengths and the mask reach the plan at run time.
    model = _model(name)
    compiled = torch.compile(model, backend=webgpu_backend, dynamic=True)
    graphs = STATS.graphs
    with torch.no_grad():
        for length in (7, 11):
            ids, mask = _padded_batch(length)
            want = model(ids, attention_mask=mask, use_cache=False).logits
            got = compiled(ids, attention_mask=mask, use_cache=False).logits
            torch.testing.assert_close(_unpadded(got), _unpadded(want), atol=1e-4, rtol=1e-4)
    assert STATS.graphs - graphs == 1


@pytest.mark.slow
@pytest.mark.parametrize("name", ["llama", "qwen2"])
def test_architecture_in_float16_matches_cpu(name, rt):
    if "shader-f16" not in rt.info.features:
        pytest.skip("the adapter lacks shader-f16")
    model = _model(name).half()
    ids = torch.randint(0, 256, (1, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = model(ids).logits.float()
        got = torch.compile(model, backend=webgpu_backend)(ids).logits.float()
    torch.testing.assert_close(got, want, atol=2e-2, rtol=2e-2)
    assert any(v.startswith("matmul.f16.") for v in STATS.plans[-1].meta.get("library", {}).values())


def test_float16_bert_reads_half_words_of_aliased_bindings(rt):
    # IREE views one binding as f16 scalars and as wider vectors: the scalars read halves of u32 words and
    # write them with atomicAnd/atomicOr (the other half may belong to another invocation).
    if "shader-f16" not in rt.info.features:
        pytest.skip("the adapter lacks shader-f16")
    config = transformers.BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=2,
                                     intermediate_size=128, vocab_size=128)
    torch.manual_seed(0)
    model = transformers.BertModel(config).eval().half()
    ids = torch.randint(0, 128, (1, 8), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = model(ids)[0].float()
        got = torch.compile(model, backend=webgpu_backend)(ids)[0].float()
    torch.testing.assert_close(got, want, atol=2e-2, rtol=2e-2)
    # The linears (f32 between casts after torch's decomposition) run as f16 library matmuls; IREE's
    # folding of the casts of one value into one buffer no longer sends the graph to IREE alone.
    assert any(v.startswith("matmul.f16.") for v in STATS.plans[-1].meta["library"].values())
