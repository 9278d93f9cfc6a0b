"""The autotuner's cache and switch (never its timings)."""

from __future__ import annotations

import json

import pytest

from torch_webgpu.kernels import autotune
from torch_webgpu.kernels.matmul import Layout, MatmulProblem


@pytest.fixture
def tune_dir(tmp_path, monkeypatch):
    """A fresh autotune cache directory, tuning enabled for every size."""
    monkeypatch.setenv("TORCH_WEBGPU_AUTOTUNE_DIR", str(tmp_path))
    monkeypatch.setenv("TORCH_WEBGPU_AUTOTUNE", "1")
    monkeypatch.setenv("TORCH_WEBGPU_AUTOTUNE_MIN_FLOPS", "0")
    autotune.forget()
    yield tmp_path
    autotune.forget()


def _problem(m=64):
    return MatmulProblem(1, m, 64, 64, Layout(0, 0, 64, 1), Layout(0, 0, 64, 1), Layout(0, 0, 64, 1))


def test_winner_is_measured_once_and_cached_on_disk(tune_dir, caps):
    calls = []
    fake = {"x": 3.0, "y": 1.0, "z": 2.0}

    def measure(name):
        calls.append(name)
        return fake[name]

    assert autotune.choose("matmul", _problem(), caps, ["x", "y", "z"], measure) == "y"
    assert calls == ["x", "y", "z"]
    assert autotune.choose("matmul", _problem(), caps, ["x", "y", "z"], measure) == "y"
    assert len(calls) == 3  # second call: cache hit
    saved = json.loads((tune_dir / "autotune.json").read_text())
    key = autotune.tuning_key("matmul", _problem(), caps)
    assert saved[key]["variant"] == "y" and caps.key in key
    autotune.forget()  # a new process reads the file
    assert autotune.choose("matmul", _problem(), caps, ["x", "y", "z"], measure) == "y"
    assert len(calls) == 3


def test_switch_off_and_small_problems_use_the_default(tune_dir, caps, monkeypatch):
    def measure(name):
        raise AssertionError("must not time")

    monkeypatch.setenv("TORCH_WEBGPU_AUTOTUNE", "0")
    assert autotune.choose("matmul", _problem(), caps, ["x", "y"], measure) == "x"
    monkeypatch.setenv("TORCH_WEBGPU_AUTOTUNE", "1")
    monkeypatch.setenv("TORCH_WEBGPU_AUTOTUNE_MIN_FLOPS", str(1 << 40))
    assert autotune.choose("matmul", _problem(), caps, ["x", "y"], measure) == "x"
    assert not (tune_dir / "autotune.json").exists()


def test_compiled_plans_tune_problems_below_the_eager_floor(tune_dir, monkeypatch):
    """A plan tunes once where it loads: a 0.2 GFLOP convolution is timed for a plan, not for eager."""
    monkeypatch.delenv("TORCH_WEBGPU_AUTOTUNE_MIN_FLOPS")
    flops = 231 << 20
    assert autotune.PLAN_MIN_FLOPS <= flops < autotune.DEFAULT_MIN_FLOPS
    timed = []

    def measure(name):
        timed.append(name)
        return {"x": 2.0, "y": 1.0}[name]

    assert autotune.pick("eager-key", ["x", "y"], flops, measure) == "x" and not timed
    assert autotune.pick("plan-key", ["x", "y"], flops, measure, floor=autotune.PLAN_MIN_FLOPS) == "y"
    assert timed == ["x", "y"]


def test_cache_next_to_compile_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("TORCH_WEBGPU_AUTOTUNE_DIR", raising=False)
    monkeypatch.setenv("TORCH_WEBGPU_CACHE_DIR", str(tmp_path))
    assert autotune.cache_file() == tmp_path / "autotune" / "autotune.json"


def test_time_launch_runs_on_the_device(rt, caps):
    import numpy as np

    from torch_webgpu.kernels.matmul import plan_matmul

    p = _problem(16)
    ids = {r: rt.allocate(64 * 64 * 4) for r in ("a", "b", "out")}
    for r in ("a", "b"):
        rt.upload(ids[r], np.ones(64 * 64, np.float32))
    seconds = autotune.time_launch(rt, plan_matmul(p, caps), ids, reps=1)
    assert seconds > 0
    assert rt.download_array(ids["out"], np.float32, 4).tolist() == [64.0] * 4
    for b in ids.values():
        rt.free(b)


def test_software_adapters_tune_only_when_asked(tune_dir, caps, monkeypatch):
    import dataclasses

    cpu = dataclasses.replace(caps, cpu=True)
    monkeypatch.delenv("TORCH_WEBGPU_AUTOTUNE")
    assert autotune.choose("matmul", _problem(), cpu, ["x", "y"], lambda name: {"x": 2, "y": 1}[name]) == "x"
    monkeypatch.setenv("TORCH_WEBGPU_AUTOTUNE", "1")
    assert autotune.choose("matmul", _problem(), cpu, ["x", "y"], lambda name: {"x": 2, "y": 1}[name]) == "y"


def test_a_failing_candidate_is_skipped(tune_dir, caps):
    def measure(name):
        if name == "x":
            raise RuntimeError("does not compile here")
        return {"y": 2.0, "z": 1.0}[name]

    assert autotune.choose("matmul", _problem(), caps, ["x", "y", "z"], measure) == "z"
