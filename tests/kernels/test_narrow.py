"""kernels/narrow.py: f32 -> f16 narrowing of odd and even lengths, every word written by one thread."""

from __future__ import annotations

import pytest
import torch

from torch_webgpu.kernels.narrow import plan_narrow

from .helpers import run_launch


@pytest.mark.parametrize("n", [1, 2, 7, 1000, 70001])
def test_narrow_rounds_as_torch(rt, caps, n):
    x = torch.randn(n) * 1000
    x[0] = float("inf")
    out = torch.zeros(n, dtype=torch.float16)
    got = run_launch(rt, plan_narrow(n, caps), {"x": x}, out)
    torch.testing.assert_close(got, x.half(), rtol=0, atol=0)


def test_narrow_refuses_nothing(caps):
    with pytest.raises(ValueError, match="at least one element"):
        plan_narrow(0, caps)
