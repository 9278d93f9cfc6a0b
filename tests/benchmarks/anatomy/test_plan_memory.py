"""benchmarks/anatomy/plan_memory (`python -m benchmarks anatomy plan-memory DIR...`): a bundle's device
memory by kind, read from its files (nothing touches a device)."""

import json
import subprocess
import sys

import torch

import torch_webgpu


def test_a_bundles_memory_by_kind(tmp_path):
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)).eval()
    torch_webgpu.export(mlp, (torch.randn(4, 16),), tmp_path / "mlp")
    out = tmp_path / "memory.json"
    command = [sys.executable, "-m", "benchmarks", "anatomy", "plan-memory", str(tmp_path / "mlp"), "--json",
               str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    [row] = json.loads(out.read_text())
    weights = sum(p.numel() * 4 for p in mlp.parameters())
    assert row["name"] == "mlp" and row["weights"] >= weights
    assert row["total_now"] >= row["weights"] + row["inputs_outputs"] > 0
    assert "mlp (MB as the runtime pool counts them" in done.stdout
