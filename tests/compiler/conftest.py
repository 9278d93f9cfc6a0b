"""Compiler test fixtures: a private compile cache, no CPU fallback, and the real runtime."""

import os

import pytest
import torch

import torch_webgpu.compiler  # noqa: F401  (registers backend="webgpu")


@pytest.fixture(scope="session", autouse=True)
def _check_native_executor():
    """Every plan these tests run goes through the native executor, and the first call of each native
    program is compared bit for bit with the Python executor (TORCH_WEBGPU_EXECUTOR=check), unless the
    run chose an executor itself."""
    chosen = os.environ.get("TORCH_WEBGPU_EXECUTOR")
    if chosen is None:
        os.environ["TORCH_WEBGPU_EXECUTOR"] = "check"
    yield
    if chosen is None:
        os.environ.pop("TORCH_WEBGPU_EXECUTOR", None)


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
