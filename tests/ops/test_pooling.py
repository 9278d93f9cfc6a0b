"""1-d/2-d pooling backwards (the window kernels of codegen/pooling.py) against torch CPU autograd."""

import pytest
import torch
import torch.nn.functional as F

CASES = {
    "max_dilated_ceil": lambda x: F.max_pool2d(x, 3, 2, 1, dilation=2, ceil_mode=True),
    "max_rect": lambda x: F.max_pool2d(x, (2, 3), (1, 2), (1, 1)),
    "avg_ceil_no_pad": lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
    "avg_override": lambda x: F.avg_pool2d(x, (2, 3), divisor_override=5),
    "adaptive_avg": lambda x: F.adaptive_avg_pool2d(x, (3, 4)),
    "adaptive_max": lambda x: F.adaptive_max_pool2d(x, (4, 3)),
    "max_1d": lambda x: F.max_pool1d(x[0], 3, 2),
    "adaptive_avg_1d": lambda x: F.adaptive_avg_pool1d(x[0], 5),
}


@pytest.mark.parametrize("name", list(CASES))
def test_pool_backward(webgpu, name):
    fn = CASES[name]
    x = torch.randn(2, 3, 9, 11, generator=torch.Generator().manual_seed(0), requires_grad=True)
    xw = x.detach().to(webgpu).requires_grad_()
    y, yw = fn(x), fn(xw)
    grad = torch.randn(y.shape, generator=torch.Generator().manual_seed(1))
    y.backward(grad)
    yw.backward(grad.to(webgpu))
    torch.testing.assert_close(xw.grad.cpu(), x.grad, rtol=1e-5, atol=1e-5)
