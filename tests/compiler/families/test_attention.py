"""Compiled plans run attention (softmax(scale * Q K^T + mask) V, after decompositions) as one
flash-attention kernel-library dispatch."""

import pytest
import torch
import torch.nn.functional as F

from torch_webgpu.compiler.webgpu_compiler import STATS
from torch_webgpu.plan.format import LowIROp


def _compiled_kinds(fn, *inputs):
    """Compile `fn`, check it against CPU; the library variant (or "iree") of each dispatch of a call."""
    with torch.no_grad():
        got = torch.compile(fn, backend="webgpu")(*inputs)
        expected = fn(*inputs)
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    plan = STATS.plans[-1]
    library = plan.meta.get("library", {})
    return [library.get(n.args["entry_point"], "iree") for n in plan.main if n.op is LowIROp.DISPATCH]


@pytest.mark.parametrize("kind", ["plain", "causal", "additive_mask", "explicit_softmax"])
def test_attention_is_one_library_dispatch(kind):
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 8, 16), torch.randn(2, 3, 10, 16), torch.randn(2, 3, 10, 12)
    if kind == "causal":
        k, v = k[:, :, :8].contiguous(), v[:, :, :8].contiguous()
    mask = torch.randn(2, 1, 8, 10)

    def fn(q, k, v, mask):
        if kind == "explicit_softmax":
            return torch.softmax(q @ k.transpose(-2, -1) / 4.0, -1) @ v
        if kind == "causal":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        if kind == "plain":
            return F.scaled_dot_product_attention(q, k, v, scale=0.3)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    kinds = _compiled_kinds(fn, q, k, v, mask)
    assert [x for x in kinds if x.startswith("attention.f32.")] and not any(
        x.startswith("matmul.") for x in kinds)
    # Only the mask (built from `where`) may need IREE; nothing of the scores is materialized.
    assert len(kinds) <= 2


@pytest.mark.parametrize("window", [None, 3])
def test_constant_causal_mask_becomes_the_kernels_causal_flag(window):
    # An additive mask built in the graph from constants only (lowest value above the diagonal, as older
    # transformers do) is the kernel's causal flag; a sliding-window one is not causal and is read.
    def fn(q, k, v):
        lowest = torch.finfo(torch.float32).min
        mask = torch.zeros(8, 8).masked_fill(torch.ones(8, 8, dtype=torch.bool).triu(1), lowest)
        if window is not None:
            mask = mask.masked_fill(torch.ones(8, 8, dtype=torch.bool).tril(-window), lowest)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    torch.manual_seed(0)
    kinds = _compiled_kinds(fn, *(torch.randn(1, 2, 8, 16) for _ in range(3)))
    (attention,) = [x for x in kinds if x.startswith("attention.f32.")]
    assert attention.endswith(".causal") == (window is None)
    assert not any(x.startswith("matmul.") for x in kinds)


def test_heads_read_through_strides_of_a_fused_projection():
    # q, k, v split out of one projection and transposed to heads: the library reads them in place.
    def fn(x, w):
        q, k, v = (x @ w).split(16, -1)
        heads = [t.view(2, 5, 2, 8).transpose(1, 2) for t in (q, k, v)]
        return F.scaled_dot_product_attention(*heads).transpose(1, 2).reshape(2, 5, 16)
    torch.manual_seed(0)
    kinds = _compiled_kinds(fn, torch.randn(2, 5, 12), torch.randn(12, 48))
    assert sum(x.startswith("attention.") for x in kinds) == 1


def test_boolean_mask_is_read_as_the_plans_bool_words():
    # masked_fill(~mask, -inf) (SDPA with a boolean mask, as GPT-2 and BERT build it) is the bool32 mask.
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 2, 8, 16), torch.randn(1, 2, 10, 16), torch.randn(1, 2, 10, 16)
    mask = torch.rand(8, 10) > 0.3
    mask[3] = False   # a fully masked row gives 0, as _safe_softmax
    kinds = _compiled_kinds(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                            q, k, v, mask)
    assert sum(x.startswith("attention.f32.") for x in kinds) == 1 and not any(
        x.startswith("matmul.") for x in kinds)


def test_attention_carries_its_variants_for_tuning():
    torch.manual_seed(0)
    q = torch.randn(1, 2, 8, 16)
    _compiled_kinds(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), q, q, q)
    (node,) = [n for n in STATS.plans[-1].main if n.op is LowIROp.DISPATCH]
    assert node.args["tune"]["key"].startswith("attention|") and len(node.args["tune"]["variants"]) > 1


def _repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    """transformers' repeat_kv: [b, kv, s, d] -> [b, kv * groups, s, d]."""
    b, kv, s, d = x.shape
    return x[:, :, None].expand(b, kv, groups, s, d).reshape(b, kv * groups, s, d)


def _repeat_copies(part) -> list:
    """The clones of expanded (repeated) values that a partition materializes."""
    return [n for n in part.forced if n.target is torch.ops.aten.clone.default
            and n.args[0].target is torch.ops.aten.expand.default]


@pytest.fixture
def partitions(monkeypatch):
    """The partitions of the graphs compiled in the test (the compile cache bypassed)."""
    from torch_webgpu.compiler import cache, library_plan

    found = []
    partition = library_plan.partition
    monkeypatch.setattr(library_plan, "partition",
                        lambda gm, caps: found.append(partition(gm, caps)) or found[-1])
    monkeypatch.setattr(cache, "load", lambda key: None)
    return found


@pytest.mark.parametrize("lq, kind", [(1, "repeat_kv"), (1, "repeat_interleave"), (6, "repeat_kv")])
def test_grouped_query_attention_reads_kv_heads_in_place(lq, kind, partitions):
    # A static cache of 45 slots (the valid ones masked in), 8 query heads over 2 KV heads; decode (one
    # query) runs the split-K variant and its combine, the repeated K/V are never copied.
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 8, lq, 16), torch.randn(1, 2, 45, 16), torch.randn(1, 2, 45, 16)
    mask = torch.arange(45) < 30 + torch.arange(lq)[:, None]

    def fn(q, k, v, mask):
        if kind == "repeat_interleave":
            k, v = k.repeat_interleave(4, 1), v.repeat_interleave(4, 1)
        else:
            k, v = _repeat_kv(k, 4), _repeat_kv(v, 4)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    kinds = _compiled_kinds(fn, q, k, v, mask)
    attention = [x for x in kinds if x.startswith("attention.f32.")]
    if lq == 1:
        assert attention[0].startswith("attention.f32.split") and attention[1] == "attention.f32.combine"
    assert attention and not any(x.startswith("matmul.") for x in kinds) and len(kinds) <= len(attention) + 1
    assert not _repeat_copies(partitions[-1])


def test_float32_softmax_of_float16_scores_is_absorbed(rt):
    # softmax(scores.float()).to(f16), as benchmarks/llama_decode.py and many models write it
    if "shader-f16" not in rt.info.features:
        pytest.skip("the adapter lacks shader-f16")
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 4, n, 16, dtype=torch.float16) for n in (1, 40, 40))
    mask = torch.where(torch.arange(40) < 33, 0.0, float("-inf")).half()

    def fn(q, k, v, mask):
        scores = q @ _repeat_kv(k[:, :2], 2).transpose(-1, -2) * 0.25 + mask
        return torch.softmax(scores.float(), dim=-1).to(q.dtype) @ _repeat_kv(v[:, :2], 2)

    with torch.no_grad():
        got = torch.compile(fn, backend="webgpu")(q, k, v, mask)
    torch.testing.assert_close(got.float(), fn(q.float(), k.float(), v.float(), mask.float()),
                               atol=2e-2, rtol=2e-2)
    library = STATS.plans[-1].meta["library"].values()
    assert any(x.startswith("attention.f16.split") for x in library)
    assert not any(x.startswith("matmul.") for x in library)


_LMS = {"llama": ("LlamaForCausalLM", "LlamaConfig"), "qwen2": ("Qwen2ForCausalLM", "Qwen2Config")}


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("name", sorted(_LMS))
def test_static_cache_language_model_attention_is_library(name, dtype, partitions, rt):
    # transformers' sdpa attention over a StaticCache (40 slots): a 16-token prefill and two decode steps
    # compile to plans whose attention is the library's (split-K for decode), with no repeat_kv copy.
    import transformers

    if dtype == torch.float16 and "shader-f16" not in rt.info.features:
        pytest.skip("the adapter lacks shader-f16")
    model_cls, config_cls = _LMS[name]
    config = getattr(transformers, config_cls)(vocab_size=256, max_position_embeddings=128, hidden_size=64,
                                               intermediate_size=128, num_hidden_layers=1,
                                               num_attention_heads=8, num_key_value_heads=2)
    torch.manual_seed(0)
    model = getattr(transformers, model_cls)(config).eval().to(dtype)
    ids = torch.randint(1, 256, (1, 16), generator=torch.Generator().manual_seed(1))

    def steps(forward, device):
        cache = transformers.StaticCache(config=config, max_cache_len=40)
        logits, tokens, position = [], ids.to(device), torch.arange(16, device=device)
        with torch.no_grad():
            for _ in range(3):
                out = forward(input_ids=tokens, past_key_values=cache, cache_position=position,
                              use_cache=True)
                logits.append(out.logits.float().cpu())
                tokens, position = out.logits[:, -1:].argmax(-1), position[-1:] + 1
        return logits

    want = steps(model.forward, "cpu")
    got = steps(torch.compile(model.to("webgpu").forward, backend="webgpu"), "webgpu")
    tol = 1e-4 if dtype == torch.float32 else 2e-2
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, atol=tol, rtol=tol)
    prefill, decode = (STATS.plans[-2], STATS.plans[-1])
    t = "f32" if dtype == torch.float32 else "f16"
    assert any(x.startswith(f"attention.{t}.q") for x in prefill.meta["library"].values())
    assert any(x.startswith(f"attention.{t}.split") for x in decode.meta["library"].values())
    assert len(partitions) == 2 and not any(_repeat_copies(p) for p in partitions)


class _Logits(torch.nn.Module):
    """A causal LM's logits for every position, with an optional attention mask (1 = token, 0 = pad)."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, ids, mask=None):
        return self.lm(input_ids=ids, attention_mask=mask).logits


def _tiny_llama(dtype):
    """benchmarks/model_zoo.py's Llama prefill model (tiny config: 2 layers, 4 query heads over 2 KV heads),
    transformers' default (sdpa) attention, no KV cache."""
    from transformers import LlamaForCausalLM

    from benchmarks.llama_decode import llama_1b_config

    config = llama_1b_config(tiny=True)
    config.use_cache = False
    torch.manual_seed(0)
    return LlamaForCausalLM(config).eval().to(dtype)


def _check_prefill_plan(plan, dtype, layers, causal):
    """One library attention dispatch per layer (causal when no mask is given), every matmul of the plan a
    projection (no Q K^T or P V in float32), and no IREE pass over the scores (the all-masked guard)."""
    library = plan.meta.get("library", {})
    kinds = [library.get(n.args["entry_point"], n.args["entry_point"]) for n in plan.main
             if n.op is LowIROp.DISPATCH]
    t = "f32" if dtype == torch.float32 else "f16"
    attention = [k for k in kinds if k.startswith("attention.")]
    assert len(attention) == layers and all(k.startswith(f"attention.{t}.q") for k in attention), kinds
    assert all(k.endswith(".causal") == causal for k in attention), kinds
    matmuls = [k for k in kinds if k.startswith("matmul.")]
    assert len(matmuls) == 7 * layers + 1 and all(k.startswith(f"matmul.{t}.") for k in matmuls), kinds
    assert not any("reduction" in k or "softmax" in k for k in kinds), kinds


def _skip_without_f16(dtype, rt):
    if dtype == torch.float16 and "shader-f16" not in rt.info.features:
        pytest.skip("the adapter lacks shader-f16")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_llama_prefill_bundle_attention_is_library(dtype, rt, tmp_path):
    # The H200 prefill figure's route (benchmarks.bundled): torch.export, the exporter's decompositions,
    # math SDPA's f32 upcast of f16 Q/K/V after repeat_kv, the causal mask built from aranges and
    # `_safe_softmax`'s guard: one causal library attention per layer reading the KV heads in place.
    import torch_webgpu
    from benchmarks.model_zoo import _LastLogits
    from torch_webgpu.compiler.export import graph as ex

    _skip_without_f16(dtype, rt)
    model = _LastLogits(_tiny_llama(dtype))
    ids = torch.randint(0, 256, (1, 8), generator=torch.Generator().manual_seed(1))
    target = ex.make_target("auto", f16=dtype == torch.float16)
    traced = ex.trace(model, [ids])
    plan = ex.compile_traced(traced, target)
    _check_prefill_plan(plan, dtype, layers=2, causal=True)
    bundle = torch_webgpu.load(ex.write_plan_bundle(plan, traced, target, tmp_path / "llama"))
    with torch.no_grad():
        want = model(ids)
    tol = 1e-4 if dtype == torch.float32 else 2e-2
    got = torch.from_numpy(bundle(ids.numpy())).float()
    torch.testing.assert_close(got, want.float(), atol=tol, rtol=tol)


@pytest.mark.parametrize("mask", ["none", "ones", "padding"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_llama_prefill_compiled_attention_is_library(dtype, mask, rt, partitions):
    # torch.compile of the same model; with an attention mask input (all ones, or left padding whose
    # padded queries attend to nothing: 0 as `_safe_softmax`) the kernel reads the mask sdpa is given.
    _skip_without_f16(dtype, rt)
    model = _Logits(_tiny_llama(dtype))
    batch = 2 if mask == "padding" else 1
    ids = torch.randint(0, 256, (batch, 8), generator=torch.Generator().manual_seed(1))
    args = [ids]
    if mask != "none":
        attend = torch.ones(batch, 8, dtype=torch.long)
        attend[1:, :3] = 0
        args.append(attend)
    with torch.no_grad():
        got = torch.compile(model, backend="webgpu")(*args)
        want = model(*args)
    tol = 1e-4 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(got.float(), want.float(), atol=tol, rtol=tol)
    _check_prefill_plan(STATS.plans[-1], dtype, layers=2, causal=mask == "none")
    assert not any(_repeat_copies(p) for p in partitions)
