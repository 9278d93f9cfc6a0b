"""Eager model checks on device="webgpu" with the CPU fallback off, against the same model on the CPU."""

import pytest
import torch

import torch_webgpu


def _tiny_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=100, n_positions=32, bos_token_id=0,
                        eos_token_id=0)
    return GPT2LMHeadModel(config).eval()


@pytest.mark.slow
def test_gpt2_lm_head_eager_matches_cpu(webgpu):
    model = _tiny_gpt2()
    ids = torch.randint(0, 100, (2, 10), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(2, 10, dtype=torch.int64)
    mask[0, :3] = 0  # left padding: position ids come from attention_mask.cumsum(-1)
    with torch.no_grad():
        expected = model(ids, attention_mask=mask).logits
        greedy = model.generate(ids[:1], max_new_tokens=4, do_sample=False)
        model.to(webgpu)
        actual = model(ids.to(webgpu), attention_mask=mask.to(webgpu)).logits
        w_greedy = model.generate(ids[:1].to(webgpu), max_new_tokens=4, do_sample=False)
    torch.testing.assert_close(actual.cpu(), expected, atol=1e-4, rtol=1e-4)
    assert torch.equal(w_greedy.cpu(), greedy)
    assert torch_webgpu.fallback_stats() == {}
