"""Compiler test fixtures: a private compile cache, no CPU fallback, and the real runtime."""

import pytest
import torch

import torch_webgpu.compiler  # noqa: F401  (registers backend="webgpu")
from tests.executor_check import check_native_executor  # noqa: F401  (autouse fixture)


@pytest.fixture(autouse=True)
def _compiler_env(monkeypatch, tmp_path_factory):
    cache = tmp_path_factory.getbasetemp() / "compile-cache"
    monkeypatch.setenv("TORCH_WEBGPU_CACHE_DIR", str(cache))
    monkeypatch.setenv("TORCH_WEBGPU_FALLBACK", "0")
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture(scope="session")
def rt():
    """The process-wide Runtime."""
    from torch_webgpu.runtime import get_runtime

    return get_runtime()
