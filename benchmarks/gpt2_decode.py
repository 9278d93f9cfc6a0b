"""GPT-2 decoding one token at a time over a static KV cache, so every step has the same shapes.

The cache is a tensor input and output of fixed size (layers, 2, batch, heads, max_len, head_dim); the new
key and value are written at `position` with a one-hot `where` (no scatter, no data-dependent shapes), and
attention masks the slots after `position`. The same module runs eagerly, under torch.compile and as a
bundle, so decode tokens/s compares like with like.
"""

from __future__ import annotations

import torch
from torch import nn


class GPT2StaticDecode(nn.Module):
    """One decode step of a `transformers` GPT2LMHeadModel: (token, position, cache) -> (logits, cache)."""

    def __init__(self, lm: nn.Module, max_len: int):
        super().__init__()
        self.lm = lm
        self.max_len = max_len
        cfg = lm.config
        self.heads, self.width = cfg.n_head, cfg.n_embd
        self.head_dim = cfg.n_embd // cfg.n_head

    def empty_cache(self, batch: int = 1) -> torch.Tensor:
        """A zero cache of the shape `forward` takes."""
        return torch.zeros(cache_shape(self.lm.config, self.max_len, batch))

    def _split_heads(self, t: torch.Tensor) -> torch.Tensor:
        return t.view(t.shape[0], 1, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, token: torch.Tensor, position: torch.Tensor, cache: torch.Tensor):
        """Logits for `token` (batch, 1) at `position` (1,), and the cache with its key/value written."""
        t = self.lm.transformer
        x = t.wte(token) + t.wpe(position)
        slots = torch.arange(self.max_len, device=token.device)
        write = (slots == position).view(1, 1, self.max_len, 1)
        mask = torch.where(slots <= position, 0.0, float("-inf")).to(x.dtype)
        caches = []
        for i, block in enumerate(t.h):
            q, k, v = block.attn.c_attn(block.ln_1(x)).split(self.width, dim=2)
            keys = torch.where(write, self._split_heads(k), cache[i, 0])
            values = torch.where(write, self._split_heads(v), cache[i, 1])
            scores = self._split_heads(q) @ keys.transpose(-1, -2) * self.head_dim ** -0.5 + mask
            y = torch.softmax(scores, dim=-1) @ values
            x = x + block.attn.c_proj(y.transpose(1, 2).reshape(x.shape))
            x = x + block.mlp(block.ln_2(x))
            caches.append(torch.stack([keys, values]))
        return self.lm.lm_head(t.ln_f(x)), torch.stack(caches)


def cache_shape(config, max_len: int, batch: int = 1) -> tuple[int, ...]:
    """(layers, key/value, batch, heads, max_len, head_dim) of a GPT-2 config's static cache."""
    return (config.n_layer, 2, batch, config.n_head, max_len, config.n_embd // config.n_head)


def decode_inputs(config, max_len: int, position: int, seed: int = 0):
    """Example inputs of a decode step at `position`: a random token and a random (filled) cache."""
    g = torch.Generator().manual_seed(seed)
    token = torch.randint(0, config.vocab_size, (1, 1), generator=g)
    cache = torch.randn(cache_shape(config, max_len), generator=g)
    return token, torch.tensor([position]), cache
