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


@pytest.fixture
def tuning_here(tmp_path, monkeypatch):
    """Autotuning on for lavapipe, for every problem size, with its own cache file."""
    from torch_webgpu.kernels import autotune

    monkeypatch.setenv("TORCH_WEBGPU_AUTOTUNE", "1")
    monkeypatch.setenv("TORCH_WEBGPU_AUTOTUNE_MIN_FLOPS", "0")
    monkeypatch.setenv("TORCH_WEBGPU_AUTOTUNE_DIR", str(tmp_path))
    autotune.forget()
    yield tmp_path / "autotune.json"
    autotune.forget()
