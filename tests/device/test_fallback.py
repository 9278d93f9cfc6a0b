"""The boxed CPU fallback: runs unported ops on the CPU, warns once per op, counts, or refuses."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.testing import assert_close

import torch_webgpu

_LIB = torch.library.Library("webgpu_fallback_test", "DEF")  # an op with only a CPU kernel
_LIB.define("twice(Tensor x) -> Tensor")
_LIB.impl("twice", lambda x: x * 2, "CPU")


def twice(x: torch.Tensor) -> torch.Tensor:
    return torch.ops.webgpu_fallback_test.twice(x)


def test_fallback_runs_on_cpu_and_counts(webgpu, monkeypatch):
    monkeypatch.delenv("TORCH_WEBGPU_FALLBACK", raising=False)
    torch_webgpu.reset_fallback_stats()
    x = torch.arange(5, dtype=torch.float32, device="webgpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = twice(x)
        twice(x)
    assert y.device.type == "webgpu"
    assert_close(y.cpu(), torch.arange(5.0) * 2)
    assert torch_webgpu.fallback_stats() == {"webgpu_fallback_test::twice": 2}
    relevant = [w for w in caught if "webgpu_fallback_test::twice" in str(w.message)]
    assert len(relevant) == 1  # warned once per op (per process), not per call


def test_fallback_disabled_names_the_op(webgpu, monkeypatch):
    monkeypatch.setenv("TORCH_WEBGPU_FALLBACK", "0")
    torch_webgpu.reset_fallback_stats()
    with pytest.raises(NotImplementedError, match="webgpu_fallback_test::twice.*TORCH_WEBGPU_FALLBACK=0"):
        twice(torch.ones(2, device="webgpu"))
    assert torch_webgpu.fallback_stats() == {}
