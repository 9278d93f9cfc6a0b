"""Strided convolutions get explicit padding covering only what their windows read (IREE's unit-dim folding
fails on ResNet's stride-2 conv to a 1x1 map); the rewritten FX graph computes the same values."""

import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

from torch_webgpu.compiler.conv_padding import crop_conv_padding


@pytest.mark.parametrize("size, kernel, stride, padding", [
    (2, 3, 2, 1),    # padded 4x4, one 3x3 window: the last padded row/column is never read
    (4, 1, 2, 0),    # ResNet's 1x1 stride-2 downsample: the input's last row is cropped
    (7, 3, 2, 1),    # nothing unread: left as is
    (6, 2, 3, 0),
])
def test_rewritten_conv_matches(size, kernel, stride, padding):
    x, w = torch.randn(1, 3, size, size + 1), torch.randn(4, 3, kernel, kernel)

    def conv(x, w):
        return F.conv2d(x, w, stride=stride, padding=padding)

    gm = make_fx(conv, tracing_mode="fake")(x, w)
    before = [n.target for n in gm.graph.nodes]
    crop_conv_padding(gm.graph)
    gm.recompile()
    torch.testing.assert_close(gm(x, w), conv(x, w))
    convs = [n for n in gm.graph.nodes if n.target is torch.ops.aten.convolution.default]
    rewritten = [n.target for n in gm.graph.nodes] != before
    assert rewritten == ((size + 2 * padding - kernel) % stride != 0
                         or (size + 1 + 2 * padding - kernel) % stride != 0)
    if rewritten:
        assert list(convs[0].args[4]) == [0, 0]
