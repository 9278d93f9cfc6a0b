"""Fixtures for kernel-library tests: the webgpu device with the CPU fallback disabled, and device caps."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import torch_webgpu
from torch_webgpu.kernels.launch import DeviceCaps


@pytest.fixture
def webgpu(monkeypatch):
    """The webgpu device, with TORCH_WEBGPU_FALLBACK=0 and no op run on the CPU."""
    monkeypatch.setenv("TORCH_WEBGPU_FALLBACK", "0")
    torch_webgpu.reset_fallback_stats()
    yield torch.device("webgpu")
    assert torch_webgpu.fallback_stats() == {}


@pytest.fixture
def caps(webgpu) -> DeviceCaps:
    """The library's caps of the open device."""
    from torch_webgpu.ops.library_launch import device_caps

    return device_caps()


def with_limits(caps: DeviceCaps, **limits: int) -> DeviceCaps:
    """`caps` with some limits replaced (names with '_' for '-')."""
    named = {k.replace("_", "-"): v for k, v in limits.items()}
    return dataclasses.replace(caps, limits={**caps.limits, **named})


@pytest.fixture
def experimental():
    """The matmul family's experimental variants offered too (as benchmarks register them), for one test."""
    from torch_webgpu.kernels.matmul import experimental_offered

    with experimental_offered() as names:
        yield names


@pytest.fixture(scope="session")
def rt():
    """The process-wide Runtime (raw buffers for torch-free library launches)."""
    from torch_webgpu.runtime import get_runtime

    return get_runtime()
