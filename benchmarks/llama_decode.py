"""Llama (transformers' LlamaForCausalLM) decoding one token at a time over a static KV cache, as
gpt2_decode.py does for GPT-2: the cache is a tensor input and output of fixed size (layers, 2, batch,
kv_heads, max_len, head_dim), the new key/value are written at `position` with a one-hot `where`, and
attention masks the slots after `position` (grouped-query attention repeats the KV heads). The linears
are the model's own modules, so a torchao-quantized model decodes through its quantized weights.

`llama_1b_config` is Llama-3.2-1B's shape (random weights: nothing is downloaded).
"""

from __future__ import annotations

import torch
from torch import nn


def llama_1b_config(tiny: bool = False):
    """Llama-3.2-1B's transformers config (hidden 2048, 16 layers, 32 heads, 8 KV heads, intermediate
    8192, vocab 128256), or a tiny one of the same structure."""
    from transformers import LlamaConfig

    if tiny:
        return LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=2, vocab_size=256, max_position_embeddings=128)
    return LlamaConfig(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                       num_key_value_heads=8, vocab_size=128256, max_position_embeddings=4096,
                       rope_theta=500000.0, tie_word_embeddings=True)


def head_dim(config) -> int:
    """The attention head width of a Llama config."""
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


def cache_shape(config, max_len: int, batch: int = 1) -> tuple[int, ...]:
    """(layers, key/value, batch, kv_heads, max_len, head_dim) of a Llama config's static cache."""
    return (config.num_hidden_layers, 2, batch, config.num_key_value_heads, max_len, head_dim(config))


class LlamaStaticDecode(nn.Module):
    """One decode step of a LlamaForCausalLM: (token, position, cache) -> (logits, cache)."""

    def __init__(self, lm: nn.Module, max_len: int):
        super().__init__()
        self.lm = lm
        self.max_len = max_len
        cfg = lm.config
        self.heads, self.kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = head_dim(cfg)

    def empty_cache(self, batch: int = 1, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """A zero cache of the shape `forward` takes."""
        return torch.zeros(cache_shape(self.lm.config, self.max_len, batch), dtype=dtype)

    def forward(self, token: torch.Tensor, position: torch.Tensor, cache: torch.Tensor):
        """Logits for `token` (batch, 1) at `position` (1,), and the cache with its key/value written."""
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        m = self.lm.model
        x = m.embed_tokens(token)
        b = x.shape[0]
        cos, sin = m.rotary_emb(x, position.view(1, 1))
        slots = torch.arange(self.max_len, device=token.device)
        write = (slots == position).view(1, 1, self.max_len, 1)
        mask = torch.where(slots <= position, 0.0, float("-inf")).to(x.dtype)
        repeat = self.heads // self.kv_heads
        fresh = []
        for i, layer in enumerate(m.layers):
            attn = layer.self_attn
            h = layer.input_layernorm(x)
            q = attn.q_proj(h).view(b, 1, self.heads, self.head_dim).transpose(1, 2)
            k = attn.k_proj(h).view(b, 1, self.kv_heads, self.head_dim).transpose(1, 2)
            v = attn.v_proj(h).view(b, 1, self.kv_heads, self.head_dim).transpose(1, 2)
            q, k = apply_rotary_pos_emb(q, k, cos, sin)
            keys = torch.where(write, k, cache[i, 0])
            values = torch.where(write, v, cache[i, 1])
            scores = q @ keys.repeat_interleave(repeat, 1).transpose(-1, -2) * self.head_dim ** -0.5 + mask
            y = torch.softmax(scores.float(), dim=-1).to(q.dtype) @ values.repeat_interleave(repeat, 1)
            x = x + attn.o_proj(y.transpose(1, 2).reshape(b, 1, self.heads * self.head_dim))
            x = x + layer.mlp(layer.post_attention_layernorm(x))
            fresh.append(torch.stack([k, v]))
        # The new cache in one `where` from the input cache and the step's own keys/values: the layers'
        # updated caches die after their attention instead of living on until a final stack.
        return self.lm.lm_head(m.norm(x)), torch.where(write, torch.stack(fresh), cache)


def decode_inputs(config, max_len: int, position: int, seed: int = 0, dtype: torch.dtype = torch.float32):
    """Example inputs of a decode step at `position`: a random token and a random (filled) cache."""
    g = torch.Generator().manual_seed(seed)
    token = torch.randint(0, config.vocab_size, (1, 1), generator=g)
    cache = torch.randn(cache_shape(config, max_len), generator=g).to(dtype)
    return token, torch.tensor([position]), cache
