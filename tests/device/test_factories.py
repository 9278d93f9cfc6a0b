"""Factories computed on the device (no host staging of values), for every dtype."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from torch_webgpu.runtime import get_runtime

from .helpers import DTYPES

NUMERIC = [d for d in DTYPES if d != torch.bool]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_empty_zeros_ones_full(no_fallback, dtype):
    assert torch.empty(3, 5, dtype=dtype, device="webgpu").shape == (3, 5)
    assert torch.empty_strided((2, 3), (1, 2), dtype=dtype, device="webgpu").stride() == (1, 2)
    assert_close(torch.zeros(3, 5, dtype=dtype, device="webgpu").cpu(), torch.zeros(3, 5, dtype=dtype))
    assert_close(torch.ones(7, dtype=dtype, device="webgpu").cpu(), torch.ones(7, dtype=dtype))
    value = True if dtype == torch.bool else 5
    assert_close(torch.full((2, 9), value, dtype=dtype, device="webgpu").cpu(),
                 torch.full((2, 9), value, dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_like_factories(no_fallback, dtype):
    base = torch.ones(4, 3, dtype=dtype, device="webgpu").t()
    for fn, value in ((torch.zeros_like, 0), (torch.ones_like, 1)):
        out = fn(base)
        assert out.device.type == "webgpu" and out.dtype == dtype and out.shape == (3, 4)
        assert_close(out.cpu(), torch.full((3, 4), value, dtype=dtype))
    assert_close(torch.full_like(base, 1).cpu(), torch.ones(3, 4, dtype=dtype))
    assert torch.empty_like(base).shape == (3, 4)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fill_and_zero_on_strided_views(no_fallback, dtype):
    x = torch.ones(5, 8, dtype=dtype, device="webgpu")
    x[:, 1::3].fill_(0)
    x[2].zero_()
    expected = torch.ones(5, 8, dtype=dtype)
    expected[:, 1::3] = 0
    expected[2] = 0
    assert_close(x.cpu(), expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_fill_float_values(no_fallback, dtype):
    for value in (-2.5, 1e-3, 65504.0 if dtype == torch.float16 else 3e38):
        assert_close(torch.full((3, 3), value, dtype=dtype, device="webgpu")[:, ::2].cpu(),
                     torch.full((3, 3), value, dtype=dtype)[:, ::2])


def test_fill_int64_beyond_int32(no_fallback):
    x = torch.full((5,), 2**40 + 1, dtype=torch.int64, device="webgpu")
    assert x.cpu().tolist() == [2**40 + 1] * 5
    x[::2].fill_(-(2**33))
    assert x.cpu().tolist() == [-(2**33), 2**40 + 1, -(2**33), 2**40 + 1, -(2**33)]


def test_factories_do_not_stage_values_on_the_host(no_fallback, monkeypatch):
    rt = get_runtime()

    def refuse_upload(*args, **kwargs):
        raise AssertionError("a factory uploaded host data")

    monkeypatch.setattr(rt, "upload", refuse_upload)
    x = torch.full((1000,), 3.0, device="webgpu")
    y = torch.arange(1000, device="webgpu")
    z = torch.eye(30, dtype=torch.int8, device="webgpu")
    w = torch.linspace(0, 1, 5, device="webgpu")
    r = torch.randn(100, device="webgpu")
    monkeypatch.undo()
    assert_close(x.cpu(), torch.full((1000,), 3.0))
    assert_close(y.cpu(), torch.arange(1000))
    assert_close(z.cpu(), torch.eye(30, dtype=torch.int8))
    assert_close(w.cpu(), torch.linspace(0, 1, 5))
    assert r.cpu().std() > 0.5


@pytest.mark.parametrize("dtype", NUMERIC, ids=str)
def test_arange(no_fallback, dtype):
    expected = torch.arange(0, 10, 3, dtype=dtype)
    assert_close(torch.arange(0, 10, 3, dtype=dtype, device="webgpu").cpu(), expected)
    if dtype not in (torch.uint8,):
        assert_close(torch.arange(5, -5, -2, dtype=dtype, device="webgpu").cpu(),
                     torch.arange(5, -5, -2, dtype=dtype))
    assert torch.arange(0, dtype=dtype, device="webgpu").numel() == 0


def test_arange_float_steps(no_fallback):
    assert_close(torch.arange(-1.0, 2.0, 0.25, device="webgpu").cpu(), torch.arange(-1.0, 2.0, 0.25))
    assert_close(torch.arange(7, device="webgpu").cpu(), torch.arange(7))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64],
                         ids=str)
def test_linspace(no_fallback, dtype):
    args = (0, 100, 11) if not dtype.is_floating_point else (-3.0, 5.0, 17)
    expected = torch.linspace(*args, dtype=dtype)
    assert_close(torch.linspace(*args, dtype=dtype, device="webgpu").cpu(), expected)
    assert_close(torch.linspace(2.0, 2.0, 1, device="webgpu").cpu(), torch.linspace(2.0, 2.0, 1))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_eye(no_fallback, dtype):
    assert_close(torch.eye(4, dtype=dtype, device="webgpu").cpu(), torch.eye(4, dtype=dtype))
    assert_close(torch.eye(3, 7, dtype=dtype, device="webgpu").cpu(), torch.eye(3, 7, dtype=dtype))
    assert_close(torch.eye(5, 2, dtype=dtype, device="webgpu").cpu(), torch.eye(5, 2, dtype=dtype))


def test_factories_inside_aot_eager_graph(no_fallback):
    def build(n: int) -> tuple[torch.Tensor, ...]:
        grid = torch.zeros(n, n, device="webgpu")
        grid.copy_(torch.eye(n, device="webgpu"))
        return grid, torch.arange(n, device="webgpu"), torch.full((n,), 2, dtype=torch.int8, device="webgpu")

    compiled = torch.compile(build, backend="aot_eager", fullgraph=True)
    grid, ramp, twos = compiled(4)
    assert grid.device.type == "webgpu"
    assert_close(grid.cpu(), torch.eye(4))
    assert_close(ramp.cpu(), torch.arange(4))
    assert_close(twos.cpu(), torch.full((4,), 2, dtype=torch.int8))
