"""Fixtures for op tests: the webgpu device with the CPU fallback disabled (a missing kernel raises)."""

import pytest
import torch

import torch_webgpu


@pytest.fixture
def webgpu(monkeypatch):
    """The webgpu device, with TORCH_WEBGPU_FALLBACK=0 and fresh fallback statistics."""
    monkeypatch.setenv("TORCH_WEBGPU_FALLBACK", "0")
    torch_webgpu.reset_fallback_stats()
    yield torch.device("webgpu")
    torch_webgpu.reset_fallback_stats()
