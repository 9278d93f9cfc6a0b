"""The static-KV-cache Llama decode step matches `transformers`' full forward token by token (also with
torchao int4 weights), and the Llama-3.2-1B-shaped benchmark cases build (tiny)."""

import pytest
import torch

from benchmarks.llama_decode import LlamaStaticDecode, decode_inputs, llama_1b_config


def _lm():
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(llama_1b_config(tiny=True)).eval()


def _check_steps(lm, atol):
    step = LlamaStaticDecode(lm, max_len=16).eval()
    ids = torch.randint(0, lm.config.vocab_size, (1, 6), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = lm(ids).logits
        cache = step.empty_cache()
        for p in range(ids.shape[1]):
            logits, cache = step(ids[:, p:p + 1], torch.tensor([p]), cache)
            torch.testing.assert_close(logits[:, 0], full[:, p], atol=atol, rtol=atol)
        assert cache[:, :, :, :, ids.shape[1]:].abs().sum() == 0   # slots after the last write untouched


def test_decode_steps_match_full_forward():
    _check_steps(_lm(), 1e-4)


def test_quantized_decode_steps_match_full_forward():
    pytest.importorskip("torchao")
    from torchao.quantization import IntxWeightOnlyConfig, quantize_
    from torchao.quantization.granularity import PerGroup

    lm = _lm()
    quantize_(lm, IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32)))
    _check_steps(lm, 1e-4)


def test_decode_inputs_shapes():
    cfg = llama_1b_config(tiny=True)
    token, position, cache = decode_inputs(cfg, 8, 4)
    assert token.shape == (1, 1) and position.tolist() == [4] and cache.shape == (2, 2, 1, 2, 8, 16)
    full = llama_1b_config()
    assert (full.hidden_size, full.num_hidden_layers, full.num_attention_heads, full.num_key_value_heads,
            full.intermediate_size, full.vocab_size) == (2048, 16, 32, 8, 8192, 128256)


@pytest.mark.parametrize("weights", ["f16", "int8", "int4"])
def test_llama_weights_follow_the_executorch_recipe(weights):
    """int4 / int8: every linear, the LM head and the token table quantized (int4 group 32; int8
    per-channel), the tied table and head bit-identical (one device copy); f16: plain f16 weights."""
    pytest.importorskip("torchao")
    from transformers import LlamaForCausalLM

    from benchmarks.model_zoo import _quantize_llama

    config = llama_1b_config(tiny=True)
    config.tie_word_embeddings = True   # as Llama-3.2-1B's
    torch.manual_seed(0)
    lm = _quantize_llama(LlamaForCausalLM(config).eval(), weights)
    table, head = lm.model.embed_tokens.weight, lm.lm_head.weight
    if weights == "f16":
        assert type(table) is torch.nn.Parameter and table.dtype == head.dtype == torch.float16
        return
    assert type(table) is type(head) and type(table).__name__ == (
        "IntxUnpackedToInt8Tensor" if weights == "int4" else "Int8Tensor")
    assert tuple(table.block_size) == ((1, 32) if weights == "int4" else (1, table.shape[1]))
    assert type(lm.model.layers[0].mlp.down_proj.weight) is type(table)
    assert table.dtype == head.dtype == torch.float16
    assert torch.equal(table.qdata, head.qdata) and torch.equal(table.scale, head.scale)
