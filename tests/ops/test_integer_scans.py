"""Exact int64 cumsum of integer and bool tensors (ops/integer_scans.py) against torch CPU."""

import pytest
import torch

CASES = [
    torch.randint(0, 2, (3, 7), generator=torch.Generator().manual_seed(0)).bool(),
    torch.randint(-(2**31), 2**31 - 1, (4, 9), dtype=torch.int32, generator=torch.Generator().manual_seed(1)),
    torch.randint(-(2**62), 2**62, (5, 2), dtype=torch.int64, generator=torch.Generator().manual_seed(2)),
    torch.randint(0, 255, (2, 3, 4), dtype=torch.uint8, generator=torch.Generator().manual_seed(3)),
]


@pytest.mark.parametrize("x", CASES, ids=[str(c.dtype) for c in CASES])
def test_cumsum_is_exact_int64(webgpu, x):
    for src in (x, x.transpose(0, -1)):  # contiguous and strided
        for dim in range(src.dim()):
            expected = torch.cumsum(src, dim)
            actual = torch.cumsum(src.to(webgpu) if src is x else x.to(webgpu).transpose(0, -1), dim)
            assert actual.dtype == expected.dtype == torch.int64
            assert torch.equal(actual.cpu(), expected)


def test_position_ids_from_attention_mask(webgpu):
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    expected = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)
    actual = (mask.to(webgpu).cumsum(-1) - 1).masked_fill(mask.to(webgpu) == 0, 1)
    assert torch.equal(actual.cpu(), expected)


def test_dtype_and_in_place(webgpu):
    ones = torch.ones(3, dtype=torch.bool)
    expected = torch.cumsum(ones, 0, dtype=torch.int32)
    assert torch.equal(torch.cumsum(ones.to(webgpu), 0, dtype=torch.int32).cpu(), expected)
    y = torch.arange(5, dtype=torch.int32)
    w = y.to(webgpu)
    w.cumsum_(0)
    assert torch.equal(w.cpu(), y.cumsum_(0))
