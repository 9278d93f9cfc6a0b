"""The two phases of a Llama-style causal LM (transformers' Llama, Qwen2/Qwen3, Mistral) as functional
modules over a static KV cache, for export: the cache is an input and an output of fixed shape
(layers, key/value, 1, kv_heads, max_len, head_dim), so one bundle's prefill and decode plans hand it
to each other on the device.

- `PrefillStep(lm, max_len, length)`: (ids [1, length], last [1]) -> (logits [1, vocab] at position
  `last`, cache): a prompt right-padded to the bucket `length`; the causal mask keeps the padding out of
  the real positions, and decoding overwrites the padding's cache slots before it attends to them.
- `DecodeStep(lm, max_len)`: (token [1, 1], position [1], cache) -> (logits [1, vocab], cache): the new
  key/value written at `position` with a one-hot `where`, attention masked past `position`.

The layers' own modules run (projections, norms, MLP, rotary embedding), so torchao-quantized linears
stay quantized.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


def check_decoder(lm: nn.Module, max_len: int) -> None:
    """NotImplementedError unless `lm` is a Llama-style causal LM these phases can run."""
    inner = getattr(lm, "model", None)
    layers = getattr(inner, "layers", None)
    needed = ("embed_tokens", "rotary_emb", "norm")
    if layers is None or not all(hasattr(inner, a) for a in needed) or not hasattr(lm, "lm_head") or not all(
            hasattr(layer, "self_attn") and hasattr(layer.self_attn, "q_proj") for layer in layers):
        raise NotImplementedError(
            f"export_decoder supports Llama-style causal LMs (Llama, Qwen2/Qwen3, Mistral: model.layers[i]."
            f"self_attn.q_proj, model.rotary_emb, lm_head); {type(lm).__name__} is not one")
    cfg = lm.config
    window = getattr(cfg, "sliding_window", None)
    if window and getattr(cfg, "use_sliding_window", True) and window < max_len:
        raise NotImplementedError(f"export_decoder: sliding-window attention (window {window} < max_len "
                                  f"{max_len}) is not supported; use max_len <= {window}")
    if max_len > cfg.max_position_embeddings:
        raise ValueError(f"export_decoder: max_len {max_len} exceeds the model's max_position_embeddings "
                         f"{cfg.max_position_embeddings}")


def _head_dim(cfg) -> int:
    return getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads


def cache_shape(cfg, max_len: int) -> tuple[int, ...]:
    """(layers, key/value, batch 1, kv_heads, max_len, head_dim) of the static cache."""
    return (cfg.num_hidden_layers, 2, 1, cfg.num_key_value_heads, max_len, _head_dim(cfg))


class _Phase(nn.Module):
    def __init__(self, lm: nn.Module, max_len: int):
        super().__init__()
        check_decoder(lm, max_len)
        self.lm = lm
        self.max_len = max_len
        cfg = lm.config
        self.heads, self.kv_heads, self.head_dim = cfg.num_attention_heads, cfg.num_key_value_heads, \
            _head_dim(cfg)

    def _qkv(self, attn: nn.Module, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        b, t = h.shape[:2]
        q = attn.q_proj(h).view(b, t, self.heads, self.head_dim)
        k = attn.k_proj(h).view(b, t, self.kv_heads, self.head_dim)
        if hasattr(attn, "q_norm"):   # Qwen3: per-head RMS norms of queries and keys
            q, k = attn.q_norm(q), attn.k_norm(k)
        v = attn.v_proj(h).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rotary_pos_emb(q.transpose(1, 2), k.transpose(1, 2), cos, sin)
        return q, k, v

    def _attend(self, attn: nn.Module, q, keys, values, mask) -> torch.Tensor:
        repeat = self.heads // self.kv_heads
        scale = getattr(attn, "scaling", self.head_dim ** -0.5)
        scores = q @ keys.repeat_interleave(repeat, 1).transpose(-1, -2) * scale + mask
        y = torch.softmax(scores.float(), dim=-1).to(q.dtype) @ values.repeat_interleave(repeat, 1)
        b, _, t, _ = y.shape
        return attn.o_proj(y.transpose(1, 2).reshape(b, t, self.heads * self.head_dim))

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.lm.lm_head(self.lm.model.norm(x)).view(1, -1)


class PrefillStep(_Phase):
    """A prompt (right-padded to `length`) -> the next token's logits and the filled cache."""

    def __init__(self, lm: nn.Module, max_len: int, length: int):
        super().__init__(lm, max_len)
        if not 0 < length <= max_len:
            raise ValueError(f"a prefill bucket of {length} tokens does not fit max_len {max_len}")
        self.length = length

    def forward(self, ids: torch.Tensor, last: torch.Tensor):
        """Logits at position `last` (the prompt's last real token) and the cache of every position."""
        m = self.lm.model
        x = m.embed_tokens(ids)
        positions = torch.arange(self.length, device=ids.device)
        cos, sin = m.rotary_emb(x, positions.view(1, -1))
        mask = torch.where(positions.view(1, -1) <= positions.view(-1, 1), 0.0, float("-inf")).to(x.dtype)
        pad = (0, 0, 0, self.max_len - self.length)
        caches = []
        for layer in m.layers:
            h = layer.input_layernorm(x)
            q, k, v = self._qkv(layer.self_attn, h, cos, sin)
            x = x + self._attend(layer.self_attn, q, k, v, mask)
            x = x + layer.mlp(layer.post_attention_layernorm(x))
            caches.append(torch.stack([F.pad(k, pad), F.pad(v, pad)]))
        return self._logits(x.index_select(1, last)), torch.stack(caches)


class DecodeStep(_Phase):
    """One token at `position` over the cache -> its logits and the cache with its key/value written."""

    def forward(self, token: torch.Tensor, position: torch.Tensor, cache: torch.Tensor):
        """Logits for `token` and the updated cache."""
        m = self.lm.model
        x = m.embed_tokens(token)
        cos, sin = m.rotary_emb(x, position.view(1, 1))
        slots = torch.arange(self.max_len, device=token.device)
        write = (slots == position).view(1, 1, self.max_len, 1)
        mask = torch.where(slots <= position, 0.0, float("-inf")).to(x.dtype)
        fresh = []
        for i, layer in enumerate(m.layers):
            h = layer.input_layernorm(x)
            q, k, v = self._qkv(layer.self_attn, h, cos, sin)
            keys = torch.where(write, k, cache[i, 0])
            values = torch.where(write, v, cache[i, 1])
            x = x + self._attend(layer.self_attn, q, keys, values, mask)
            x = x + layer.mlp(layer.post_attention_layernorm(x))
            fresh.append(torch.stack([k, v]))
        # The new cache in one `where` from the input cache and the step's own keys/values: the layers'
        # updated caches die after their attention instead of living on until a final stack.
        return self._logits(x), torch.where(write, torch.stack(fresh), cache)
