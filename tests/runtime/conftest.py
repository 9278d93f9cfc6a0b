"""Fixtures for runtime tests: the process-wide runtime on the real adapter (lavapipe on CI)."""

import pytest

from torch_webgpu.runtime import get_runtime


@pytest.fixture(scope="session")
def rt():
    """The process-wide Runtime."""
    return get_runtime()
