"""3-d convolution and pooling, forward and backward (the aten backward ops autograd dispatches), vs CPU."""

import pytest
import torch
import torch.nn.functional as F

CASES = {
    "max_pool3d": lambda x: F.max_pool3d(x, (2, 3, 2), stride=(1, 2, 2), padding=(1, 1, 0), ceil_mode=True),
    "max_pool3d_dilated": lambda x: F.max_pool3d(x, 2, dilation=(2, 1, 1)),
    "avg_pool3d": lambda x: F.avg_pool3d(x, (3, 2, 2), stride=2, padding=1, count_include_pad=False),
    "avg_pool3d_override": lambda x: F.avg_pool3d(x, 2, divisor_override=3, ceil_mode=True),
    "adaptive_avg_pool3d": lambda x: F.adaptive_avg_pool3d(x, (3, 2, 4)),
    "adaptive_max_pool3d": lambda x: F.adaptive_max_pool3d(x, (2, 3, 3)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_pool3d_forward_backward(webgpu, name):
    fn = CASES[name]
    x = torch.randn(2, 3, 5, 6, 7, generator=torch.Generator().manual_seed(0), requires_grad=True)
    xw = x.detach().to(webgpu).requires_grad_()
    y, yw = fn(x), fn(xw)
    torch.testing.assert_close(yw.detach().cpu(), y.detach(), rtol=1e-5, atol=1e-5)
    g = torch.randn(y.shape, generator=torch.Generator().manual_seed(1))
    y.backward(g)
    yw.backward(g.to(webgpu))
    torch.testing.assert_close(xw.grad.cpu(), x.grad, rtol=1e-5, atol=1e-5)


CONV_CASES = {
    "conv3d": (False, dict(stride=(2, 1, 2), padding=(1, 2, 0), dilation=(2, 1, 1), groups=2)),
    "conv3d_plain": (False, dict()),
    "conv_transpose3d": (True, dict(stride=(2, 1, 2), padding=(1, 0, 1), output_padding=(1, 0, 1), groups=2)),
    "conv_transpose3d_dilated": (True, dict(stride=2, dilation=(1, 2, 1))),
}


@pytest.mark.parametrize("name", list(CONV_CASES))
def test_conv3d_forward_backward(webgpu, name):
    transposed, kwargs = CONV_CASES[name]
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 4, 5, 6, 5, generator=g, requires_grad=True)
    shape = (4, 3, 2, 3, 2) if transposed else (6, 4 // kwargs.get("groups", 1), 2, 3, 2)
    w = torch.randn(shape, generator=g, requires_grad=True)
    b = torch.randn(3 * kwargs.get("groups", 1) if transposed else 6, generator=g, requires_grad=True)
    fn = F.conv_transpose3d if transposed else F.conv3d
    leaves = [t.detach().to(webgpu).requires_grad_() for t in (x, w, b)]
    y, yw = fn(x, w, b, **kwargs), fn(*leaves, **kwargs)
    torch.testing.assert_close(yw.detach().cpu(), y.detach(), rtol=1e-4, atol=1e-4)
    grad = torch.randn(y.shape, generator=g)
    y.backward(grad)
    yw.backward(grad.to(webgpu))
    for cpu, dev in zip((x, w, b), leaves, strict=True):
        torch.testing.assert_close(dev.grad.cpu(), cpu.grad, rtol=1e-4, atol=1e-4)
