"""Blocked scans (ops/scans.py): rows longer than one block and than BLOCK² (two recursion levels), scans
along every dim of strided views, cummax/cummin ties and NaN across block boundaries, and accuracy of long
float32 scans against a float64 reference (the CPU accumulates in double)."""

import pytest
import torch

from torch_webgpu.ops.scans import BLOCK


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


SCANS = {
    "cumsum": lambda t, d: t.cumsum(d),
    "cumprod": lambda t, d: (1 + t * 1e-3).cumprod(d),
    "logcumsumexp": lambda t, d: t.logcumsumexp(d),
    "cummax": lambda t, d: t.cummax(d),
    "cummin": lambda t, d: t.cummin(d),
}


def _check(got, want, atol):
    """Compare a scan's result (a tensor, or cummax/cummin's (values, indices)) with the CPU's."""
    if isinstance(want, tuple):
        got, want = tuple(t.cpu() for t in got), tuple(want)
    else:
        got = got.cpu()
    torch.testing.assert_close(got, want, atol=atol, rtol=1e-4)


@pytest.mark.parametrize("name", list(SCANS))
@pytest.mark.parametrize("length", [BLOCK - 1, BLOCK + 1, 3 * BLOCK * BLOCK + 5], ids=str)
def test_long_rows(webgpu, name, length):
    x = _x(2, length)
    _check(SCANS[name](x.to(webgpu), 1), SCANS[name](x, 1), 1e-3)


@pytest.mark.parametrize("name", list(SCANS))
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_strided_views_along_each_dim(webgpu, name, dim):
    x = _x(6, 300, 8)
    view = lambda t: t.transpose(0, 2)[:, ::2]  # noqa: E731
    _check(SCANS[name](view(x.to(webgpu)), dim), SCANS[name](view(x), dim), 1e-4)


@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_extreme_ties_and_nan_across_blocks(webgpu, op):
    x = torch.zeros(5 * BLOCK)
    x[3 * BLOCK + 7] = float("nan")   # a NaN in a later block sticks, with its own index
    x[BLOCK + 2] = 1.0 if op == "cummax" else -1.0
    x[2 * BLOCK + 2] = x[BLOCK + 2]   # a tie in a later block moves the index there
    got, want = getattr(x.to(webgpu), op)(0), getattr(x, op)(0)
    torch.testing.assert_close(got.values.cpu(), want.values, equal_nan=True)
    torch.testing.assert_close(got.indices.cpu(), want.indices)


def test_long_cumsum_stays_accurate(webgpu):
    x = _x(300_000)
    ref = x.double().cumsum(0)
    err = (x.to(webgpu).cumsum(0).cpu().double() - ref).abs().max().item()
    assert err < 2e-3, err   # one thread per row was 5e-3; the CPU (double accumulation) 3e-5
    ref = x.double().logcumsumexp(0)
    assert (x.to(webgpu).logcumsumexp(0).cpu().double() - ref).abs().max().item() < 1e-4


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.bool], ids=str)
def test_exact_integer_cumsum_of_long_rows(webgpu, dtype):
    # int64 sums past 2**31 and float32's 2**24, over rows that take two recursion levels
    gen = torch.Generator().manual_seed(3)
    x = torch.randint(0, 2**30, (2, 3 * BLOCK * BLOCK + 5), generator=gen).to(dtype)
    if dtype == torch.int64:
        x = x * 2**20
    torch.testing.assert_close(x.to(webgpu).cumsum(1).cpu(), x.cumsum(1))
