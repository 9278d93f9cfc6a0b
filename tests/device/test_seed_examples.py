"""The seed's promise: with TORCH_WEBGPU_FALLBACK=0, device="webgpu" works like "cuda"."""

from __future__ import annotations

import torch
from torch.testing import assert_close


def test_tensor_literal(no_fallback):
    x = torch.tensor([1, 2, 3], device="webgpu")
    assert x.device.type == "webgpu" and x.dtype == torch.int64
    assert_close(x.cpu(), torch.tensor([1, 2, 3]))


def test_randn(no_fallback):
    x = torch.randn(3, 4, device="webgpu")
    assert x.shape == (3, 4) and x.device.type == "webgpu" and x.dtype == torch.float32
    values = x.cpu()
    assert torch.isfinite(values).all() and values.std() > 0


def test_zeros(no_fallback):
    assert_close(torch.zeros(10, device="webgpu").cpu(), torch.zeros(10))


def test_ones(no_fallback):
    assert_close(torch.ones(5, 5, device="webgpu").cpu(), torch.ones(5, 5))


def test_to_webgpu_and_back(no_fallback):
    x = torch.randn(4, 7)
    y = x.to("webgpu")
    assert y.device == torch.device("webgpu", 0)
    back = y.to("cpu")
    assert back.device.type == "cpu"
    assert_close(back, x, rtol=0, atol=0)
