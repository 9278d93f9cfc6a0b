"""The CPU fallback (ops/fallback.py) on ops whose CPU kernels produce integer side outputs or call back
into the device with integer tensors (issue 11 item 2), with the fallback on."""

from __future__ import annotations

import warnings

import pytest
import torch

import torch_webgpu


@pytest.fixture
def fallback_on(webgpu, monkeypatch):
    """The webgpu device with the CPU fallback enabled (its first-use warnings silenced)."""
    monkeypatch.setenv("TORCH_WEBGPU_FALLBACK", "1")
    torch_webgpu.reset_fallback_stats()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield webgpu


def _well_conditioned(n: int = 5) -> torch.Tensor:
    torch.manual_seed(0)
    return torch.randn(n, n).add(5 * torch.eye(n))


def test_linalg_inv_with_fallback(fallback_on):
    """The issue's repro: inv's CPU kernel checks its int32 `info` with any() on the device."""
    a = _well_conditioned()
    torch.testing.assert_close(torch.linalg.inv(a.to(fallback_on)).cpu(), torch.linalg.inv(a))


def test_integer_side_outputs(fallback_on):
    """linalg info (inv_ex, cholesky_ex), unique counts and histc come back right and on the device."""
    a = _well_conditioned()
    got = torch.linalg.inv_ex(a.to(fallback_on))
    assert got.info.device.type == "webgpu" and got.info.dtype == torch.int32 and got.info.item() == 0
    torch.testing.assert_close(got.inverse.cpu(), torch.linalg.inv(a))
    spd = a @ a.T
    got = torch.linalg.cholesky_ex(spd.to(fallback_on))
    assert got.info.item() == 0
    torch.testing.assert_close(got.L.cpu(), torch.linalg.cholesky(spd), rtol=1e-4, atol=1e-4)
    singular = torch.zeros(3, 3)
    assert torch.linalg.cholesky_ex(singular.to(fallback_on)).info.item() == torch.linalg.cholesky_ex(
        singular).info.item()
    x = torch.tensor([3, 1, 3, 2, 1, 3])
    values, counts = torch.unique(x.to(fallback_on), return_counts=True)
    torch.testing.assert_close(counts.cpu(), torch.unique(x, return_counts=True)[1])
    torch.testing.assert_close(values.cpu(), torch.tensor([1, 2, 3]))
    y = torch.randn(100)
    torch.testing.assert_close(torch.histc(y.to(fallback_on), bins=5).cpu(), torch.histc(y, bins=5))


def test_integer_info_checks_on_device(webgpu):
    """What those CPU kernels run on the device: any/all/sum/amax of int32 info tensors (fallback off)."""
    info = torch.tensor([0, 0, 2, 0], dtype=torch.int32)
    d = info.to(webgpu)
    assert d.any().item() and not d.all().item() and d.sum().item() == 2 and d.amax().item() == 2
    assert torch.count_nonzero(d).item() == 1 and (d != 0).any().item()
    assert not torch.zeros(3, dtype=torch.int64, device=webgpu).any().item()
