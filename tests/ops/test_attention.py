"""ops/attention.py: eager scaled_dot_product_attention on the flash kernel; gradients by the math path."""

import torch
import torch.nn.functional as F

from torch_webgpu.runtime.capture import recording


def _labels(fn):
    with recording() as capture:
        out = fn()
    return out, [entry[3] for entry in capture if entry is not None]


def test_sdpa_is_one_flash_dispatch(webgpu):
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 17, 24), torch.randn(2, 3, 17, 24), torch.randn(2, 3, 17, 24)
    out, labels = _labels(lambda: F.scaled_dot_product_attention(q.to(webgpu), k.to(webgpu), v.to(webgpu),
                                                                 is_causal=True))
    assert len(labels) == 1 and labels[0].startswith("attention.f32.") and labels[0].endswith(".causal")
    torch.testing.assert_close(out.cpu(), F.scaled_dot_product_attention(q, k, v, is_causal=True),
                               atol=1e-4, rtol=1e-4)


def test_sdpa_3d_with_mask_and_gqa(webgpu):
    torch.manual_seed(1)
    q, k, v = torch.randn(2, 9, 24), torch.randn(2, 11, 24), torch.randn(2, 11, 24)
    mask = torch.randn(9, 11)
    out = F.scaled_dot_product_attention(q.to(webgpu), k.to(webgpu), v.to(webgpu), attn_mask=mask.to(webgpu))
    torch.testing.assert_close(out.cpu(), F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
                               atol=1e-4, rtol=1e-4)
    q4, k4 = torch.randn(1, 4, 9, 24), torch.randn(1, 2, 11, 24)
    v4 = torch.randn(1, 2, 11, 24)
    out = F.scaled_dot_product_attention(q4.to(webgpu), k4.to(webgpu), v4.to(webgpu), enable_gqa=True)
    torch.testing.assert_close(out.cpu(), F.scaled_dot_product_attention(q4, k4, v4, enable_gqa=True),
                               atol=1e-4, rtol=1e-4)


def test_sdpa_gradients_use_the_math_path(webgpu):
    torch.manual_seed(2)
    cpu = [torch.randn(1, 2, 7, 24, requires_grad=True) for _ in range(3)]
    dev = [t.detach().to(webgpu).requires_grad_() for t in cpu]
    F.scaled_dot_product_attention(*cpu, is_causal=True).square().sum().backward()
    F.scaled_dot_product_attention(*dev, is_causal=True).square().sum().backward()
    for got, ref in zip(dev, cpu, strict=True):
        torch.testing.assert_close(got.grad.cpu(), ref.grad, atol=1e-4, rtol=1e-4)


def test_sdpa_with_dropout_falls_back_to_math(webgpu):
    q = torch.randn(1, 1, 4, 24).to(webgpu)
    out = F.scaled_dot_product_attention(q, q, q, dropout_p=1.0)
    assert torch.equal(out.cpu(), torch.zeros(1, 1, 4, 24))


def test_sdpa_decode_step_is_split_k_then_combine(webgpu):
    # one query per head over a 70-slot static cache with the first 51 valid, 8 heads over 2 KV heads
    torch.manual_seed(3)
    q, k, v = torch.randn(1, 8, 1, 32), torch.randn(1, 2, 70, 32), torch.randn(1, 2, 70, 32)
    mask = (torch.arange(70) < 51).view(1, 70)
    out, labels = _labels(lambda: F.scaled_dot_product_attention(
        q.to(webgpu), k.to(webgpu), v.to(webgpu), attn_mask=mask.to(webgpu), enable_gqa=True))
    kernels = [x for x in labels if x and x.startswith("attention.")]
    assert kernels[0].startswith("attention.f32.split") and kernels[1:] == ["attention.f32.combine"]
    torch.testing.assert_close(out.cpu(), F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                                         enable_gqa=True),
                               atol=1e-4, rtol=1e-4)
