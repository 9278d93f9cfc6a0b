"""Comparisons with NaN operands follow IEEE (and torch): every ordered comparison is false, `ne` is true."""

import pytest
import torch


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_nan_comparisons_match_cpu(webgpu, dtype):
    a = torch.tensor([float("nan"), 1.0, 2.0, float("nan"), float("inf")], dtype=dtype)
    b = torch.tensor([1.0, 1.0, float("nan"), float("nan"), float("inf")], dtype=dtype)
    for op in (torch.eq, torch.ne, torch.lt, torch.le, torch.gt, torch.ge):
        assert torch.equal(op(a.to(webgpu), b.to(webgpu)).cpu(), op(a, b)), op.__name__
        assert torch.equal(op(a.to(webgpu), 1.0).cpu(), op(a, 1.0)), op.__name__
