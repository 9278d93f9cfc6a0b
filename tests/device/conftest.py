"""Fixtures for the webgpu device tests: the device itself and a fallback-free guard."""

from __future__ import annotations

import pytest
import torch

import torch_webgpu


@pytest.fixture(scope="session")
def webgpu() -> torch.device:
    """The webgpu device, opened once (fails, rather than skips, when no adapter is available)."""
    assert torch.webgpu.is_available(), "no WebGPU adapter: install Mesa lavapipe (see README)"
    return torch.device("webgpu")


@pytest.fixture
def no_fallback(webgpu: torch.device, monkeypatch: pytest.MonkeyPatch):
    """Run the test with TORCH_WEBGPU_FALLBACK=0 and assert no op went through the CPU fallback."""
    monkeypatch.setenv("TORCH_WEBGPU_FALLBACK", "0")
    torch_webgpu.reset_fallback_stats()
    yield webgpu
    assert torch_webgpu.fallback_stats() == {}
