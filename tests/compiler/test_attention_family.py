"""Compiled plans run attention (softmax(scale * Q K^T + mask) V, after decompositions) as one
flash-attention kernel-library dispatch."""

import pytest
import torch
import torch.nn.functional as F

from torch_webgpu.compiler.low_ir import LowIROp
from torch_webgpu.compiler.webgpu_compiler import STATS


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
