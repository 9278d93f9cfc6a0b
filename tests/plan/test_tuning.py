"""Compiled plans carry their library ops' variants; the executor that loads a plan times them once on its
own device, caches the winner and runs it (plan/tuning.py)."""

import json

import pytest
import torch
import torch.nn as nn

from torch_webgpu.compiler.webgpu_compiler import STATS
from torch_webgpu.kernels import autotune
from torch_webgpu.plan import lowering
from torch_webgpu.plan.format import LowIROp


def _compile(model, x):
    with torch.no_grad():
        expected = model(x)
        got = torch.compile(model, backend="webgpu")(x)
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    return STATS.plans[-1]


def _tunable(plan):
    return [n for n in plan.main if n.op is LowIROp.DISPATCH and "tune" in n.args]


def test_plan_carries_every_variant_with_the_default_first():
    torch.manual_seed(0)
    plan = _compile(nn.Linear(64, 96), torch.randn(32, 64))
    (node,) = _tunable(plan)
    variants = node.args["tune"]["variants"]
    assert len(variants) > 1
    assert variants[0]["entry_point"] == node.args["entry_point"]
    assert node.args["tune"]["key"].startswith("matmul|")
    # every variant is an executable of the plan with its WGSL, and counts as a library dispatch
    for v in variants:
        assert v["entry_point"] in plan.executables and v["entry_point"] in plan.meta["library"]
        assert plan.executables[v["entry_point"]].wgsl_file in plan.wgsl


def test_software_adapter_runs_the_default_without_timing(monkeypatch, tmp_path):
    monkeypatch.delenv("TORCH_WEBGPU_AUTOTUNE", raising=False)
    monkeypatch.setenv("TORCH_WEBGPU_AUTOTUNE_DIR", str(tmp_path))
    autotune.forget()
    torch.manual_seed(0)
    plan = _compile(nn.Linear(64, 96), torch.randn(32, 64))
    compiled = lowering(plan)
    (node,) = [n for n in compiled.plan.main if n.op is LowIROp.DISPATCH]
    assert node.args["entry_point"] == _tunable(plan)[0].args["entry_point"]
    assert "tune" not in node.args
    assert not (tmp_path / "autotune.json").exists()


def _ran(plan):
    """The entry points the executor runs for `plan` on this device (after tuning)."""
    return [n.args["entry_point"] for n in lowering(plan).plan.main if n.op is LowIROp.DISPATCH]


def test_tuned_plan_runs_the_cached_winner_and_matches(tuning_here):
    torch.manual_seed(0)
    model, x = nn.Sequential(nn.Linear(64, 96), nn.ReLU(), nn.Linear(96, 8)), torch.randn(32, 64)
    plan = _compile(model, x)     # timed and checked against CPU with the winners
    tunable = _tunable(plan)
    assert len(tunable) == 2
    entries = json.loads(tuning_here.read_text())
    assert len(entries) == len({n.args["tune"]["key"] for n in tunable})
    for entry in entries.values():
        assert entry["variant"] in entry["seconds"] and len(entry["seconds"]) > 1
    for node, entry_point in zip(tunable, _ran(plan), strict=True):
        key = node.args["tune"]["key"] + "|"
        winner = next(e["variant"] for k, e in entries.items() if k.startswith(key))
        assert entry_point == next(v["entry_point"] for v in node.args["tune"]["variants"]
                                   if v["variant"] == winner)


@pytest.mark.parametrize("variant_index", [1, -1])
def test_every_variant_a_plan_carries_computes_the_same(variant_index, tuning_here):
    torch.manual_seed(0)
    model, x = nn.Linear(48, 80), torch.randn(20, 48)
    (node,) = _tunable(_compile(model, x))
    chosen = node.args["tune"]["variants"][variant_index]
    # a cache naming this variant the winner: the executor runs it without timing
    key = autotune.device_key(node.args["tune"]["key"], _caps())
    tuning_here.write_text(json.dumps({key: {"variant": chosen["variant"], "seconds": {}}}))
    autotune.forget()
    torch._dynamo.reset()
    plan = _compile(model, x)
    assert _ran(plan) == [chosen["entry_point"]]


def _caps():
    from torch_webgpu.kernels.launch import DeviceCaps
    from torch_webgpu.runtime import get_runtime

    return DeviceCaps.from_runtime(get_runtime())


def test_split_k_variant_runs_its_combine_and_matches(tuning_here):
    """A few-row linear with a long K carries split-K variants (two dispatches, partial sums in a plan
    buffer); a cached split winner runs both and matches torch, bias and activation included."""
    torch.manual_seed(0)
    model, x = nn.Sequential(nn.Linear(520, 72), nn.GELU()), torch.randn(37, 520)
    (node,) = _tunable(_compile(model, x))    # every candidate timed here, the split ones included
    split = next(v for v in node.args["tune"]["variants"] if ".s4" in v["variant"])
    (combine,) = split["then"]
    assert combine["entry_point"].startswith("lib_matmul_f32_splitk4_combine")
    key = autotune.device_key(node.args["tune"]["key"], _caps())
    timed = json.loads(tuning_here.read_text())[key]["seconds"]
    assert 0 < timed[split["variant"]] < float("inf")   # its two dispatches ran (a failure times inf)
    tuning_here.write_text(json.dumps({key: {"variant": split["variant"], "seconds": {}}}))
    autotune.forget()
    torch._dynamo.reset()
    plan = _compile(model, x)     # checked against CPU with the split winner
    assert _ran(plan) == [split["entry_point"], combine["entry_point"]]
