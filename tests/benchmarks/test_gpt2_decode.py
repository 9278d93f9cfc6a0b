"""The static-KV-cache GPT-2 decode step matches `transformers`' full forward token by token."""

import torch

from benchmarks.gpt2_decode import GPT2StaticDecode, decode_inputs


def test_decode_steps_match_full_forward():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=128, n_positions=32)
    lm = GPT2LMHeadModel(cfg).eval()
    step = GPT2StaticDecode(lm, max_len=16).eval()
    ids = torch.randint(0, cfg.vocab_size, (1, 6))
    with torch.no_grad():
        full = lm(ids).logits
        cache = step.empty_cache()
        for p in range(ids.shape[1]):
            logits, cache = step(ids[:, p:p + 1], torch.tensor([p]), cache)
            torch.testing.assert_close(logits[:, 0], full[:, p], atol=1e-4, rtol=1e-4)
        assert cache[:, :, :, :, ids.shape[1]:].abs().sum() == 0   # slots after the last write untouched


def test_decode_inputs_shapes():
    from transformers import GPT2Config

    token, position, cache = decode_inputs(GPT2Config(n_layer=3, n_embd=32, n_head=4, vocab_size=50), 8, 4)
    assert token.shape == (1, 1) and position.tolist() == [4] and cache.shape == (3, 2, 1, 4, 8, 8)
