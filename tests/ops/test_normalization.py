"""Group norm through the library's row kernel (statistics and normalisation in one pass) against the CPU."""

from __future__ import annotations

import pytest
import torch


@pytest.mark.parametrize("groups", [1, 3, 12])
def test_native_group_norm_outputs(webgpu, groups):
    """out, mean and rstd of aten.native_group_norm, with weight and bias."""
    torch.manual_seed(0)
    x, w, b = torch.randn(3, 12, 5, 7) + 2, torch.randn(12), torch.randn(12)
    got = torch.ops.aten.native_group_norm(x.to(webgpu), w.to(webgpu), b.to(webgpu), 3, 12, 35, groups, 1e-5)
    want = torch.ops.aten.native_group_norm(x, w, b, 3, 12, 35, groups, 1e-5)
    for g, e in zip(got, want, strict=True):
        torch.testing.assert_close(g.cpu(), e, rtol=1e-4, atol=1e-4)


def test_group_norm_half(webgpu):
    """f16 input (rows read as halves, statistics in f32)."""
    x = torch.randn(2, 8, 33).half()
    torch.testing.assert_close(torch.nn.functional.group_norm(x.to(webgpu), 4).cpu(),
                               torch.nn.functional.group_norm(x.float(), 4).half(), rtol=1e-2, atol=1e-2)
