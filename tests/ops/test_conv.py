"""ops/conv.py: eager convolutions run on the kernel library and keep their backward."""

import torch
import torch.nn.functional as F

from torch_webgpu.runtime.capture import recording


def _labels(fn):
    with recording() as capture:
        out = fn()
    return out, [entry[3] for entry in capture if entry is not None]


def test_conv2d_forward_is_one_library_dispatch(webgpu):
    torch.manual_seed(0)
    x, w, b = torch.randn(2, 6, 9, 9), torch.randn(8, 3, 3, 3), torch.randn(8)
    out, labels = _labels(lambda: F.conv2d(x.to(webgpu), w.to(webgpu), b.to(webgpu), stride=2, padding=1,
                                           groups=2))
    assert len(labels) == 1 and labels[0].startswith("conv2d.f32."), labels
    ref = F.conv2d(x, w, b, stride=2, padding=1, groups=2)
    torch.testing.assert_close(out.cpu(), ref, atol=1e-4, rtol=1e-4)


def test_depthwise_and_transposed_forward(webgpu):
    torch.manual_seed(1)
    x, w = torch.randn(1, 4, 8, 8), torch.randn(4, 1, 3, 3)
    out, labels = _labels(lambda: F.conv2d(x.to(webgpu), w.to(webgpu), padding=1, groups=4))
    assert labels == ["conv2d.f32.depthwise"]
    torch.testing.assert_close(out.cpu(), F.conv2d(x, w, padding=1, groups=4), atol=1e-4, rtol=1e-4)
    wt, b = torch.randn(4, 3, 3, 3), torch.randn(3)
    out, labels = _labels(lambda: F.conv_transpose2d(x.to(webgpu), wt.to(webgpu), b.to(webgpu), stride=2,
                                                     padding=1, output_padding=1))
    assert len(labels) == 1 and labels[0].startswith("convt2d.f32."), labels
    ref = F.conv_transpose2d(x, wt, b, stride=2, padding=1, output_padding=1)
    torch.testing.assert_close(out.cpu(), ref, atol=1e-4, rtol=1e-4)


def test_conv1d_backward_still_matches(webgpu):
    torch.manual_seed(2)
    x, w, b = torch.randn(2, 4, 11), torch.randn(6, 4, 3), torch.randn(6)
    leaves = [t.to(webgpu).requires_grad_() for t in (x, w, b)]
    F.conv1d(*leaves, stride=2, padding=1).square().sum().backward()
    cpu = [t.clone().requires_grad_() for t in (x, w, b)]
    F.conv1d(*cpu, stride=2, padding=1).square().sum().backward()
    for got, ref in zip(leaves, cpu, strict=True):
        torch.testing.assert_close(got.grad.cpu(), ref.grad, atol=1e-3, rtol=1e-4)


def test_bfloat16_keeps_the_direct_kernel(webgpu):
    x, w = torch.randn(1, 2, 5, 5, dtype=torch.bfloat16), torch.randn(3, 2, 3, 3, dtype=torch.bfloat16)
    out = F.conv2d(x.to(webgpu), w.to(webgpu))
    torch.testing.assert_close(out.cpu().float(), F.conv2d(x.float(), w.float()), atol=0.1, rtol=0.05)
