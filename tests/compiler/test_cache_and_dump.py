"""The disk cache (a second process does not call IREE) and TORCH_WEBGPU_DUMP_DIR."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from .models import MLP

_SCRIPT = """
import torch, json
import torch_webgpu.compiler
from torch_webgpu.compiler.webgpu_compiler import STATS
from tests.compiler.models import MLP
torch.manual_seed(0)
model, x = torch.nn.Sequential(MLP(), torch.nn.Softmax(0)), torch.randn(4, 16)   # library + IREE
with torch.no_grad():
    y = torch.compile(model, backend="webgpu")(x)
torch.testing.assert_close(y, model(x), atol=1e-4, rtol=1e-4)
print(json.dumps({"iree_calls": STATS.iree_calls, "cache_hits": STATS.cache_hits}))
"""


def _run(cache_dir: Path) -> dict:
    env = dict(os.environ, TORCH_WEBGPU_CACHE_DIR=str(cache_dir))
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, cwd=root, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_second_process_does_not_call_iree(tmp_path):
    first = _run(tmp_path / "cache")
    second = _run(tmp_path / "cache")
    assert first == {"iree_calls": 1, "cache_hits": 0}
    assert second == {"iree_calls": 0, "cache_hits": 1}


def test_dump_dir_has_high_ir_iree_input_wgsl_and_plan(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_WEBGPU_DUMP_DIR", str(tmp_path))
    monkeypatch.setenv("TORCH_WEBGPU_CACHE_DIR", str(tmp_path / "fresh-cache"))
    torch.manual_seed(0)
    with torch.no_grad():
        torch.compile(torch.nn.Sequential(MLP(), torch.nn.Softmax(0)), backend="webgpu")(torch.randn(4, 16))
    (graph,) = [d for d in tmp_path.iterdir() if d.name.startswith("graph_")]
    names = {p.name for p in graph.iterdir()}
    assert {"high_ir.txt", "iree_input.mlir", "iree_hal.mlir", "plan.txt", "plan"} <= names
    assert "aten.mm" in (graph / "high_ir.txt").read_text()
    plan = json.loads((graph / "plan" / "plan.json").read_text())
    wgsl = [p for p in graph.iterdir() if p.suffix == ".wgsl"]
    assert len(wgsl) == len(plan["executables"]) >= 1
    dispatched = {n["entry_point"] for n in plan["main"] if n["op"] == "dispatch"}
    # library dispatches also carry their other variants for load-time tuning (plan_tuning.py)
    variants = {step["entry_point"] for n in plan["main"] if n["op"] == "dispatch"
                for v in n.get("tune", {}).get("variants", []) for step in (v, *v.get("then", ()))}
    assert dispatched | variants == set(plan["executables"])
