"""Grids past WebGPU's 65,535 workgroups per dimension are folded into x and y (plan/grid.py), and still
compute right."""

import torch

from torch_webgpu.plan.grid import folded_grid


def test_folded_grid_covers_the_logical_grid():
    assert folded_grid((65535, 1, 1), 65535) is None
    assert folded_grid((70000, 2, 1), 65535) is None          # only 1-D grids fold
    for x in (65536, 100514, 1 << 20, 3 * 65535 + 1):
        gx, gy, gz = folded_grid((x, 1, 1), 65535)
        assert gx <= 65535 and gy <= 65535 and gz == 1 and gx * gy >= x and gx * (gy - 1) < x


def test_add_over_64_mib_folds_its_grid_and_matches_cpu(tmp_path, monkeypatch):
    # IREE gives this add 65,536 workgroups in x: one past the limit.
    monkeypatch.setenv("TORCH_WEBGPU_DUMP_DIR", str(tmp_path))
    n = 16 << 20
    a, b = torch.randn(n), torch.randn(n)
    compiled = torch.compile(lambda x, y: x + y, backend="webgpu")
    torch.testing.assert_close(compiled(a, b), a + b)
    plans = "".join(p.read_text() for p in tmp_path.glob("*/plan.txt"))
    assert "workgroups=[65536, 1, 1]" in plans
