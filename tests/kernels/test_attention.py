"""kernels/attention.py: flash attention variants against torch CPU's scaled_dot_product_attention."""

import pytest
import torch
import torch.nn.functional as F

import torch_webgpu  # noqa: F401  (the webgpu device holds the buffers)
from torch_webgpu.kernels import DeviceCaps
from torch_webgpu.kernels.attention import (
    AttentionProblem,
    Strided,
    partials_bytes,
    plan_attention,
    plan_attention_combine,
    split_applies,
    variants,
)
from torch_webgpu.ops.library_launch import device_caps, record_launch


def _layout(t: torch.Tensor) -> Strided:
    return Strided(t.storage_offset(), tuple(t.stride()))


def _attend(problem: AttentionProblem, variant, q, k, v, mask=None, dtype=torch.float32):
    dev = {"q": q.to("webgpu"), "k": k.to("webgpu"), "v": v.to("webgpu")}
    if mask is not None:
        dev["mask"] = mask.to("webgpu")
    out = torch.full((problem.batch, problem.heads, problem.lq, problem.value_dim), float("nan"),
                     dtype=dtype, device="webgpu")
    launch = plan_attention(problem, device_caps(), variant)
    if "partials" in launch.bindings:   # split-K: partial states (NaN-filled: every slot gets written)
        partials = torch.full((partials_bytes(problem) // 4,), float("nan"), device="webgpu")
        record_launch(launch, dev | {"partials": partials})
        record_launch(plan_attention_combine(problem, device_caps()), {"partials": partials, "out": out})
    else:
        record_launch(launch, dev | {"out": out})
    return out.cpu()


def _qkv(b, h, lq, lk, d, dv=None, hk=None, dtype=torch.float32):
    hk = hk or h
    return (torch.randn(b, h, lq, d, dtype=dtype), torch.randn(b, hk, lk, d, dtype=dtype),
            torch.randn(b, hk, lk, dv or d, dtype=dtype))


def test_every_variant_odd_sizes():
    torch.manual_seed(0)
    q, k, v = _qkv(2, 3, 37, 29, 24)
    ref = F.scaled_dot_product_attention(q, k, v)
    p = AttentionProblem(2, 3, 37, 29, 24)
    names = variants(p, device_caps())
    assert names
    for name in names:
        torch.testing.assert_close(_attend(p, name, q, k, v), ref, atol=1e-4, rtol=1e-4)


def test_causal_scale_and_gqa():
    torch.manual_seed(1)
    q, k, v = _qkv(1, 4, 40, 40, 24, hk=2)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3, enable_gqa=True)
    p = AttentionProblem(1, 4, 40, 40, 24, kv_heads=2, causal=True, scale=0.3)
    torch.testing.assert_close(_attend(p, None, q, k, v), ref, atol=1e-4, rtol=1e-4)


def test_bool_mask_broadcast():
    torch.manual_seed(2)
    q, k, v = _qkv(2, 2, 19, 33, 24)
    mask = torch.rand(2, 1, 19, 33) > 0.4
    mask[..., 0] = True                       # every row attends somewhere (torch CPU's NaN rows aside)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    full = mask.expand(2, 2, 19, 33)
    p = AttentionProblem(2, 2, 19, 33, 24, mask="bool", mask_layout=_layout(full))
    torch.testing.assert_close(_attend(p, None, q, k, v, mask), ref, atol=1e-4, rtol=1e-4)


def test_additive_mask_and_value_dim():
    torch.manual_seed(3)
    q, k, v = _qkv(1, 2, 21, 18, 24, dv=40)
    mask = torch.randn(21, 18)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    full = mask.expand(1, 2, 21, 18)
    p = AttentionProblem(1, 2, 21, 18, 24, dv=40, mask="additive", mask_layout=_layout(full))
    torch.testing.assert_close(_attend(p, None, q, k, v, mask), ref, atol=1e-4, rtol=1e-4)


def test_fully_masked_rows_give_zero():
    q, k, v = _qkv(1, 1, 5, 7, 24)
    mask = torch.ones(1, 1, 5, 7, dtype=torch.bool)
    mask[0, 0, 2] = False
    p = AttentionProblem(1, 1, 5, 7, 24, mask="bool", mask_layout=_layout(mask))
    got = _attend(p, "q32", q, k, v, mask)
    assert torch.equal(got[0, 0, 2], torch.zeros(24))
    torch.testing.assert_close(got[0, 0, 3], F.scaled_dot_product_attention(q, k, v)[0, 0, 3])


def test_strided_operands():
    torch.manual_seed(4)
    qkv = torch.randn(2, 13, 3, 2, 24)   # [batch, seq, (q|k|v), heads, dim]: a fused projection
    q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    qkv_d = qkv.to("webgpu")
    qd, kd, vd = (qkv_d[:, :, i].transpose(1, 2) for i in range(3))
    out = torch.empty(2, 13, 2, 24, device="webgpu").transpose(1, 2)
    p = AttentionProblem(2, 2, 13, 13, 24, causal=True, q=_layout(qd), k=_layout(kd), v=_layout(vd),
                         out=_layout(out))
    record_launch(plan_attention(p, device_caps(), "q32"), {"q": qd, "k": kd, "v": vd, "out": out})
    torch.testing.assert_close(out.cpu(), ref, atol=1e-4, rtol=1e-4)


def test_f16_storage():
    if not device_caps().shader_f16:
        pytest.skip("the adapter has no shader-f16")
    torch.manual_seed(5)
    q, k, v = _qkv(1, 2, 33, 20, 24, dtype=torch.float16)
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
    p = AttentionProblem(1, 2, 33, 20, 24, causal=True, dtype="f16")
    got = _attend(p, None, q, k, v, dtype=torch.float16)
    torch.testing.assert_close(got.float(), ref, atol=2e-3, rtol=2e-3)


def test_variants_follow_device_limits():
    small = DeviceCaps.portable()
    names = variants(AttentionProblem(1, 1, 128, 128, 64), small)
    assert "q32" not in names and names                 # 512 invocations exceed the portable 256
    assert variants(AttentionProblem(1, 1, 128, 128, 512), small) == []
    big = DeviceCaps(limits={"max-compute-invocations-per-workgroup": 1024,
                             "max-compute-workgroup-storage-size": 49152})
    assert variants(AttentionProblem(1, 12, 128, 128, 64), big)[0] == "q8"      # BERT-base: 192 workgroups
    assert variants(AttentionProblem(8, 12, 512, 512, 64), big)[0] == "q32"
    with pytest.raises(ValueError, match="math path"):
        plan_attention(AttentionProblem(1, 1, 128, 128, 512), small)
    with pytest.raises(ValueError, match="kv heads"):
        plan_attention(AttentionProblem(1, 3, 8, 8, 16, kv_heads=2), small)
    with pytest.raises(TypeError, match="shader-f16"):
        plan_attention(AttentionProblem(1, 1, 8, 8, 16, dtype="f16"), small)
    with pytest.raises(ValueError, match="layout"):
        plan_attention(AttentionProblem(1, 1, 8, 8, 16, mask="bool"), small)


@pytest.mark.parametrize("groups", [1, 4, 8])
def test_split_k_decode_gqa_every_split_count(groups):
    # one query per head over a KV length that is no multiple of the key tile; KV head = head // groups
    torch.manual_seed(6)
    kv = 2
    q, k, v = _qkv(2, kv * groups, 1, 77, 24, hk=kv)
    ref = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    p = AttentionProblem(2, kv * groups, 1, 77, 24, kv_heads=kv)
    names = variants(p, device_caps())
    assert split_applies(p) and sorted(names) == ["split2", "split4"]   # 5 key tiles
    for name in names:
        torch.testing.assert_close(_attend(p, name, q, k, v), ref, atol=1e-4, rtol=1e-4)


def test_split_k_static_cache_mask_and_prefix_queries():
    # a static cache: 50 slots, the first 37 valid (additive mask of -inf after), 2 queries x 4 heads/kv
    torch.manual_seed(7)
    q, k, v = _qkv(1, 8, 2, 50, 16, dv=20, hk=2)
    mask = torch.zeros(2, 50)
    mask[:, 37:] = float("-inf")
    mask[1, 36] = float("-inf")
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    p = AttentionProblem(1, 8, 2, 50, 16, dv=20, kv_heads=2, mask="additive",
                         mask_layout=_layout(mask.expand(1, 8, 2, 50)))
    assert variants(p, device_caps())[0].startswith("split")
    for name in ("split2", "split4"):
        torch.testing.assert_close(_attend(p, name, q, k, v, mask), ref, atol=1e-4, rtol=1e-4)
    boolean = mask == 0
    pb = AttentionProblem(1, 8, 2, 50, 16, dv=20, kv_heads=2, mask="bool",
                          mask_layout=_layout(boolean.expand(1, 8, 2, 50)))
    torch.testing.assert_close(_attend(pb, "split4", q, k, v, boolean), ref, atol=1e-4, rtol=1e-4)


def test_split_k_causal_and_fully_masked_rows():
    torch.manual_seed(8)
    q, k, v = _qkv(1, 4, 3, 40, 16, hk=1)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    p = AttentionProblem(1, 4, 3, 40, 16, kv_heads=1, causal=True)
    assert split_applies(p)
    # (queries 0-2 see keys 0-2: every split but the first is empty; the combine skips them)
    torch.testing.assert_close(_attend(p, "split2", q, k, v), ref, atol=1e-4, rtol=1e-4)
    mask = torch.ones(1, 1, 3, 40, dtype=torch.bool)
    mask[..., 1, :] = False
    pm = AttentionProblem(1, 4, 3, 40, 16, kv_heads=1, mask="bool",
                          mask_layout=_layout(mask.expand(1, 4, 3, 40)))
    got = _attend(pm, "split2", q, k, v, mask)
    assert torch.equal(got[:, :, 1], torch.zeros(1, 4, 16))
    torch.testing.assert_close(got[:, :, 0], F.scaled_dot_product_attention(
        q, k, v, enable_gqa=True)[:, :, 0], atol=1e-4, rtol=1e-4)


def test_split_k_f16():
    if not device_caps().shader_f16:
        pytest.skip("the adapter has no shader-f16")
    torch.manual_seed(9)
    q, k, v = _qkv(1, 8, 1, 70, 32, hk=2, dtype=torch.float16)
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), enable_gqa=True)
    p = AttentionProblem(1, 8, 1, 70, 32, kv_heads=2, dtype="f16")
    got = _attend(p, "split4", q, k, v, dtype=torch.float16)
    torch.testing.assert_close(got.float(), ref, atol=2e-3, rtol=2e-3)


def test_split_k_defaults_fill_a_large_gpu():
    big = DeviceCaps(features=frozenset({"shader-f16"}),
                     limits={"max-compute-invocations-per-workgroup": 1024,
                             "max-compute-workgroup-storage-size": 49152})
    # Llama-3.2-1B decode at 2,048 context: 8 KV heads x 16 slices = 128 workgroups of 4 query heads
    p = AttentionProblem(1, 32, 1, 2048, 64, kv_heads=8, dtype="f16")
    names = variants(p, big)
    assert names[0] == "split16" and set(names) == {"split2", "split4", "split8", "split16", "split32"}
    launch = plan_attention(p, big)
    assert launch.grid == (16, 1, 8) and launch.workgroup_size == (64, 1, 1)
    assert not split_applies(AttentionProblem(1, 32, 16, 2048, 64, kv_heads=8))   # prefill: one pass
