"""Exact int32/int64 max/min/argmax/argmin (ops/integer_extremes.py) against torch CPU."""

import pytest
import torch


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_values_past_float32_precision_and_first_tie(webgpu, dtype):
    big = 2**31 - 5 if dtype == torch.int32 else 2**60
    # 16777217 and 16777216 are the same float32: only an exact comparison picks the right one
    x = torch.tensor([[16777216, 16777217, 16777217, -big], [big, big - 1, big, -3]], dtype=dtype)
    w = x.to(webgpu)
    for fn in (torch.argmax, torch.argmin):
        assert torch.equal(fn(w, dim=1).cpu(), fn(x, dim=1))
        assert torch.equal(fn(w).cpu(), fn(x))
    for fn in (torch.max, torch.min):
        values, indices = fn(w, dim=1, keepdim=True)
        expected = fn(x, dim=1, keepdim=True)
        assert torch.equal(values.cpu(), expected.values) and torch.equal(indices.cpu(), expected.indices)
        assert torch.equal(fn(w).cpu(), fn(x))
    assert torch.equal(torch.amax(w, dim=(0, 1)).cpu(), torch.amax(x, dim=(0, 1)))
    assert torch.equal(torch.amin(w.t(), dim=0).cpu(), torch.amin(x.t(), dim=0))


def test_long_rows(webgpu):
    x = torch.randint(-(2**31), 2**31 - 1, (3, 5000), dtype=torch.int32)
    assert torch.equal(torch.argmax(x.to(webgpu), dim=1).cpu(), torch.argmax(x, dim=1))
    assert torch.equal(torch.max(x.to(webgpu)).cpu(), torch.max(x))
