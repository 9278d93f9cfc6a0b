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


def pytest_terminal_summary(terminalreporter):
    """Per-op OpInfo pass/fail counts and totals of this session."""
    from .opinfo_runner import RESULTS

    if not RESULTS:
        return
    tr = terminalreporter
    tr.section("webgpu OpInfo results (passed/failed/raised of the samples run; skipped = CPU rejects)")
    totals = {}
    for (name, dtype), r in sorted(RESULTS.items()):
        tr.write_line(f"{name:50s} {dtype:8s} pass {r.passed:3d}  fail {r.failed:3d}  raised {r.raised:3d}  "
                      f"skipped {r.skipped:3d}")
        t = totals.setdefault(dtype, [0, 0, 0, 0])
        t[0] += 1
        t[1] += r.passed
        t[2] += r.total
        t[3] += r.passed == r.total
    for dtype, (ops, passed, total, clean) in totals.items():
        rate = passed / total if total else 0.0
        tr.write_line(f"TOTAL {dtype}: {ops} ops, {clean} with every sample passing; "
                      f"{passed}/{total} samples passed ({rate:.1%})")
