"""The bitonic sort (ops/bitonic.py) against torch CPU: random shapes, dims, dtypes, ties, NaNs, +-0."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

DTYPES = [torch.float32, torch.float16, torch.int32, torch.int64, torch.uint8, torch.bool]


def _sample(dtype: torch.dtype, shape, seed: int, special: bool) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        x = torch.randint(-3, 4, shape, generator=g).to(dtype)  # few distinct values: many ties
        if special and x.numel():
            flat = x.view(-1)
            pick = torch.randint(0, 4, (flat.numel(),), generator=g)
            flat[pick == 0] = float("nan")
            flat[pick == 1] = -0.0
            flat[pick == 2] = float("inf")
        return x
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype == torch.int64:
        return torch.randint(-3, 4, shape, generator=g) * (1 << 33) + torch.randint(0, 2, shape, generator=g)
    low = 0 if dtype == torch.uint8 else -5
    return torch.randint(low, 6, shape, generator=g).to(dtype)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(dtype=st.sampled_from(DTYPES), shape=st.lists(st.integers(0, 40), min_size=1, max_size=3),
       dim=st.integers(-3, 2), descending=st.booleans(), special=st.booleans(), seed=st.integers(0, 2**16),
       transpose=st.booleans())
def test_stable_sort_matches_cpu(webgpu, dtype, shape, dim, descending, special, seed, transpose):
    x = _sample(dtype, tuple(shape), seed, special)
    if transpose and x.dim() > 1:
        x = x.transpose(0, -1)  # strided input
    dim = dim % x.dim()
    values, indices = torch.sort(x, dim=dim, descending=descending, stable=True)
    w_values, w_indices = torch.sort(x.to(webgpu), dim=dim, descending=descending, stable=True)
    torch.testing.assert_close(w_values.cpu(), values, equal_nan=True)
    assert torch.equal(w_indices.cpu(), indices)


@pytest.mark.parametrize("n", [511, 512, 513, 1500, 4099])
@pytest.mark.parametrize("descending", [False, True])
def test_long_rows_cross_workgroups(webgpu, n, descending):
    # rows longer than one workgroup's 512 slots use global merge steps
    x = _sample(torch.float32, (2, n), n, special=True)
    values, indices = torch.sort(x, descending=descending, stable=True)
    w_values, w_indices = torch.sort(x.to(webgpu), descending=descending, stable=True)
    torch.testing.assert_close(w_values.cpu(), values, equal_nan=True)
    assert torch.equal(w_indices.cpu(), indices)


def test_int32_topk_values_and_valid_indices(webgpu):
    # topk's tie order is unspecified (CPU picks by its selection algorithm): check values and indices' values
    x = torch.randint(-4, 5, (6, 30), dtype=torch.int32)
    values, _ = torch.topk(x, 5, dim=1)
    w_values, w_indices = torch.topk(x.to(webgpu), 5, dim=1)
    assert torch.equal(w_values.cpu(), values)
    assert torch.equal(torch.gather(x, 1, w_indices.cpu()), values)


def test_argsort_int64_large_values(webgpu):
    x = torch.tensor([2**40, -(2**40), 5, -5, 2**62, -(2**62), 0], dtype=torch.int64)
    assert torch.equal(torch.argsort(x.to(webgpu)).cpu(), torch.argsort(x))
    assert torch.equal(torch.argsort(x.to(webgpu), descending=True).cpu(), torch.argsort(x, descending=True))
