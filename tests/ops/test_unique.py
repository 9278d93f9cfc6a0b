"""unique / unique_consecutive (ops/unique.py) against torch CPU: flat and along a dim, inverse, counts."""

import pytest
import torch


def _same(actual, expected):
    for a, e in zip(actual, expected, strict=True):
        torch.testing.assert_close(a.cpu(), e, equal_nan=True, rtol=0, atol=0)


X = torch.tensor([[3.0, 1.0, 3.0, float("nan")], [1.0, 1.0, 3.0, float("nan")], [3.0, 1.0, 3.0, -0.0],
                  [3.0, 1.0, 3.0, float("nan")]])


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_unique_flat(webgpu, dtype):
    x = torch.nan_to_num(X, nan=7.0).to(dtype)
    _same(torch.unique(x.to(webgpu), return_inverse=True, return_counts=True),
          torch.unique(x, return_inverse=True, return_counts=True))


def test_unique_nan_and_consecutive(webgpu):
    _same(torch.unique(X.to(webgpu), return_counts=True), torch.unique(X, return_counts=True))
    flat = X.reshape(-1)
    _same(torch.unique_consecutive(flat.to(webgpu), return_inverse=True, return_counts=True),
          torch.unique_consecutive(flat, return_inverse=True, return_counts=True))


@pytest.mark.parametrize("dim", [0, 1])
def test_unique_along_dim(webgpu, dim):
    x = torch.nan_to_num(X, nan=7.0).to(torch.int32)
    _same(torch.unique(x.to(webgpu), dim=dim, return_inverse=True, return_counts=True),
          torch.unique(x, dim=dim, return_inverse=True, return_counts=True))
    _same(torch.unique_consecutive(x.to(webgpu), dim=dim, return_inverse=True, return_counts=True),
          torch.unique_consecutive(x, dim=dim, return_inverse=True, return_counts=True))


def test_unique_empty(webgpu):
    x = torch.empty(0)
    _same(torch.unique(x.to(webgpu), return_inverse=True, return_counts=True),
          torch.unique(x, return_inverse=True, return_counts=True))


def test_repeated_shape_new_data(webgpu):
    # the group count is data-dependent: a second call with the same shape must not reuse the first's
    for seed in range(3):
        x = torch.randint(0, 3 + seed, (4, 6), generator=torch.Generator().manual_seed(seed))
        _same(torch.unique(x.to(webgpu), return_inverse=True, return_counts=True),
              torch.unique(x, return_inverse=True, return_counts=True))
