"""Fixtures for kernel-library tests: the runtime on the real adapter and its DeviceCaps."""

import pytest

from torch_webgpu.kernels import DeviceCaps
from torch_webgpu.runtime import get_runtime


@pytest.fixture(scope="session")
def rt():
    """The process-wide Runtime."""
    return get_runtime()


@pytest.fixture(scope="session")
def caps(rt):
    """The DeviceCaps of the runtime."""
    return DeviceCaps.from_runtime(rt)
