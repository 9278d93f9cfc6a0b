"""Memory: freed tensors return to the pool; the budget raises torch.OutOfMemoryError; the device survives."""

from __future__ import annotations

import gc

import pytest
import torch
from torch.testing import assert_close

import torch_webgpu
from torch_webgpu.runtime import get_runtime


@pytest.fixture
def memory_limit(webgpu):
    """Set a small memory budget for the test (restored afterwards); never allocates real memory."""
    previous = torch_webgpu.device.memory_limit()

    def set_limit(nbytes):
        torch_webgpu.device.set_memory_limit(nbytes)

    yield set_limit
    torch_webgpu.device.set_memory_limit(previous)


def test_alloc_free_cycles_return_to_baseline(no_fallback):
    gc.collect()
    baseline = torch.webgpu.memory_allocated()
    reserved_before = torch.webgpu.memory_reserved()
    live_before = torch_webgpu._C._live_buffer_count()
    for i in range(10_000):
        x = torch.empty(64 + i % 512, device="webgpu")
        del x
    assert torch.webgpu.memory_allocated() == baseline
    assert torch_webgpu._C._live_buffer_count() == live_before
    growth = torch.webgpu.memory_reserved() - reserved_before
    assert growth < (1 << 20)  # freed buffers were reused, not re-created


def test_views_keep_the_buffer_alive(no_fallback):
    gc.collect()
    baseline = torch.webgpu.memory_allocated()
    base = torch.arange(1000, dtype=torch.float32, device="webgpu")
    view = base[500:]
    del base
    assert torch.webgpu.memory_allocated() > baseline
    assert_close(view[:3].cpu(), torch.tensor([500.0, 501.0, 502.0]))
    del view
    assert torch.webgpu.memory_allocated() == baseline


def test_peak_and_empty_cache(no_fallback):
    gc.collect()   # tensors of earlier tests held in reference cycles would be freed mid-test
    torch.webgpu.reset_peak_memory_stats()
    start = torch.webgpu.memory_allocated()
    x = torch.empty(1 << 18, device="webgpu")
    assert torch.webgpu.max_memory_allocated() >= start + x.nbytes
    del x
    torch.webgpu.empty_cache()
    stats = torch.webgpu.memory_stats()   # one snapshot: reserved and allocated after the same drain
    assert stats["reserved"] == stats["allocated"]


def test_budget_exhaustion_raises_oom_and_device_stays_usable(no_fallback, memory_limit):
    gc.collect()
    torch.webgpu.empty_cache()
    memory_limit(torch.webgpu.memory_reserved() + (48 << 20))
    keep = [torch.ones(1 << 20, device="webgpu") for _ in range(8)]  # 8 x 4 MiB
    with pytest.raises(torch.OutOfMemoryError, match="out of memory"):
        torch.empty(32 << 20, device="webgpu")  # 128 MiB more
    with pytest.raises(torch.OutOfMemoryError):
        torch.randn(64, 1 << 18, device="webgpu")
    assert_close(keep[3][:4].cpu(), torch.ones(4))  # existing tensors are intact
    del keep
    y = torch.full((8 << 20,), 2.0, device="webgpu")  # fits once the others are freed
    assert y[-1].item() == 2.0


def test_single_buffer_above_max_buffer_size(no_fallback):
    max_size = get_runtime().pool.max_buffer_size
    with pytest.raises(torch.OutOfMemoryError, match="max-buffer-size|memory limit"):
        torch.empty(max_size // 4 + 1024, dtype=torch.float32, device="webgpu")
    assert torch.ones(3, device="webgpu").cpu().tolist() == [1.0, 1.0, 1.0]


def test_memory_limit_from_environment(webgpu, monkeypatch):
    monkeypatch.setenv("TORCH_WEBGPU_MEMORY_LIMIT", "512M")
    monkeypatch.setattr(torch_webgpu.device, "_memory_limit_known", False)
    monkeypatch.setattr(torch_webgpu.device, "_memory_limit", None)
    assert torch_webgpu.device.memory_limit() == 512 << 20
    assert torch.webgpu.get_device_properties().total_memory == 512 << 20
