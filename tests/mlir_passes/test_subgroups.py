"""Subgroup reductions: a target with the device's one subgroup size makes IREE reduce rows in parallel
(warp reduction: WGSL subgroupAdd/subgroupMax/subgroupShuffleXor) instead of one thread per row."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F

import torch_webgpu.compiler  # noqa: F401  (registers backend="webgpu")
from mlir_passes.webgpu_target import WebGPUTarget
from tests.mlir_passes.test_spirv_to_wgsl import probe_subgroup_size
from torch_webgpu.runtime import get_runtime

LIMITS = {"max-compute-invocations-per-workgroup": 1024, "subgroup-min-size": 32, "subgroup-max-size": 32}


def test_target_enables_subgroups_only_for_one_known_size_and_the_feature():
    with_subgroups = WebGPUTarget.from_limits(LIMITS, {"subgroups"})
    attr = with_subgroups.device_targets_attribute()
    assert with_subgroups.subgroup_size == 32
    assert "subgroup = shuffle|arithmetic" in attr and "subgroup_size_choices = [32]" in attr
    assert "cap:GroupNonUniformShuffle" in attr and "cap:GroupNonUniformArithmetic" in attr
    without_feature = WebGPUTarget.from_limits(LIMITS, set())
    ranged = WebGPUTarget.from_limits({**LIMITS, "subgroup-min-size": 4, "subgroup-max-size": 128},
                                      {"subgroups"})
    for target in (without_feature, ranged, WebGPUTarget()):
        attr = target.device_targets_attribute()
        assert target.subgroup_size is None
        assert "subgroup = none" in attr and "GroupNonUniform" not in attr
    assert without_feature.key() != with_subgroups.key()
    # Warp reduction reduces per-subgroup partials with one subgroup: at most size² threads.
    assert with_subgroups.thread_limit == 1024
    assert WebGPUTarget.from_limits({**LIMITS, "subgroup-min-size": 8, "subgroup-max-size": 8},
                                    {"subgroups"}).thread_limit == 64


@pytest.fixture(scope="module")
def subgroup_size():
    """The adapter's one subgroup size, measured by a shader (Dawn reports lavapipe's as 4..128)."""
    size = probe_subgroup_size(get_runtime())
    if size is None:
        pytest.skip("adapter has no subgroups of one fixed size")
    return size


@pytest.fixture
def subgroup_device(monkeypatch, tmp_path, subgroup_size):
    """The runtime's device info reporting its probed subgroup size, so compiled plans use subgroups."""
    limits = get_runtime().info.limits
    monkeypatch.setitem(limits, "subgroup-min-size", subgroup_size)
    monkeypatch.setitem(limits, "subgroup-max-size", subgroup_size)
    monkeypatch.setenv("TORCH_WEBGPU_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TORCH_WEBGPU_DUMP_DIR", str(tmp_path / "dump"))
    monkeypatch.setenv("TORCH_WEBGPU_FALLBACK", "0")
    # IREE's reductions lowered with subgroups are under test here; compiled plans would otherwise run
    # these ops as the library's row and reduction kernels (tests/compiler/families/test_rows.py)
    monkeypatch.setenv("TORCH_WEBGPU_LIBRARY", "0")
    torch._dynamo.reset()
    yield tmp_path / "dump"
    torch._dynamo.reset()


ROWS = (64, 1000)
CASES = {
    # name: (function, input shape, whether IREE picks its warp reduction: single-result reductions only)
    "sum": (lambda x: x.sum(), (4096,), True),
    "mean": (lambda x: x.mean(dim=-1), ROWS, True),
    "softmax": (lambda x: torch.softmax(x, -1), ROWS, True),
    "layer_norm": (lambda x: F.layer_norm(x, (ROWS[1],)), ROWS, True),
    "amax": (lambda x: torch.amax(x, -1), ROWS, True),
    "argmax": (lambda x: torch.argmax(x, -1), ROWS, False),  # value + index: per-row threads
    # IREE 3.13's warp reduction of float16 fails to compile: compiled again without subgroups.
    "sum_f16": (lambda x: x.sum(-1), (16, 256), False),
}


@pytest.mark.parametrize("name", list(CASES))
def test_compiled_reduction_with_subgroups_matches_cpu(name, subgroup_device):
    fn, shape, warp = CASES[name]
    torch.manual_seed(0)
    f16 = name.endswith("_f16")
    if f16 and "shader-f16" not in get_runtime().info.features:
        pytest.skip("adapter lacks shader-f16")
    x = torch.randn(shape, dtype=torch.float16 if f16 else torch.float32)
    with torch.no_grad():
        got = torch.compile(fn, backend="webgpu")(x)
    want = fn(x.float()).half() if f16 else fn(x)
    torch.testing.assert_close(got, want, atol=2e-2 if f16 else 1e-4, rtol=2e-2 if f16 else 1e-4)
    (graph,) = subgroup_device.iterdir()
    plan = json.loads((graph / "plan" / "plan.json").read_text())
    dispatches = [n for n in plan["main"] if n["op"] == "dispatch"]
    assert dispatches
    for node in dispatches:
        spec = plan["executables"][node["entry_point"]]
        wgsl = (graph / "plan" / spec["wgsl_file"]).read_text()
        uses_subgroups = "enable subgroups;" in wgsl
        assert uses_subgroups == warp, wgsl[:2000]
        if warp:
            # Several invocations share each row (before subgroups: 1 thread for a whole `sum`).
            assert math.prod(spec["workgroup_size"]) > 1
            assert "diagnostic(off, subgroup_uniformity);" in wgsl


def test_adapter_subgroup_sizes_and_override(monkeypatch):
    from torch_webgpu.runtime.adapter import _subgroup_sizes

    info = {"subgroup_min_size": 32, "subgroup_max_size": 32}
    monkeypatch.delenv("TORCH_WEBGPU_SUBGROUP_SIZE", raising=False)
    assert _subgroup_sizes(info) == {"subgroup-min-size": 32, "subgroup-max-size": 32}
    # wgpudawn 0.32 spells the fields "stackgroup_*".
    assert _subgroup_sizes({"stackgroup_min_size": 4, "stackgroup_max_size": 128}) == {
        "subgroup-min-size": 4, "subgroup-max-size": 128}
    monkeypatch.setenv("TORCH_WEBGPU_SUBGROUP_SIZE", "0")
    assert _subgroup_sizes(info) == {}
    monkeypatch.setenv("TORCH_WEBGPU_SUBGROUP_SIZE", "8")
    assert _subgroup_sizes(info) == {"subgroup-min-size": 8, "subgroup-max-size": 8}
    monkeypatch.setenv("TORCH_WEBGPU_SUBGROUP_SIZE", "wide")
    with pytest.raises(ValueError, match="TORCH_WEBGPU_SUBGROUP_SIZE"):
        _subgroup_sizes(info)
