"""Adapter selection, device description, backend choice."""

import os
import subprocess
import sys

import pytest

from torch_webgpu.runtime import NoAdapterError
from torch_webgpu.runtime.adapter import select_adapter, wanted_toggles
from torch_webgpu.runtime.backend import backend_name, load_backend


def test_describe_names_adapter_limits_and_features(rt):
    text = rt.describe()
    assert rt.info.name in text and "max-storage-buffer-binding-size" in text
    assert rt.info.limits["max-compute-invocations-per-workgroup"] >= 256
    assert rt.info.backend == backend_name()


def test_adapter_by_index_and_by_name(rt):
    gpu = load_backend()
    by_index = select_adapter(gpu, "0")
    name = by_index.info["device"]
    assert select_adapter(gpu, name[:6]).info["device"] == name


def test_unknown_adapter_raises(rt):
    with pytest.raises(NoAdapterError, match="no-such-gpu"):
        select_adapter(load_backend(), "no-such-gpu")


def test_bad_backend_name(monkeypatch):
    monkeypatch.setenv("TORCH_WEBGPU_BACKEND", "metal3")
    with pytest.raises(ValueError, match="metal3"):
        backend_name()


def test_wgpu_native_backend_runs_a_kernel():
    code = (
        "import numpy as np\n"
        "from torch_webgpu.runtime import get_runtime\n"
        "rt = get_runtime(); assert rt.backend == 'wgpu', rt.backend\n"
        "b = rt.allocate(64); rt.fill(b, 5); print(int(rt.download_array(b, np.uint32, 16).sum()))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, "TORCH_WEBGPU_BACKEND": "wgpu"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "80"


def _describe_in_subprocess(env_extra: dict) -> str:
    code = ("from torch_webgpu.runtime import get_runtime\n"
            "rt = get_runtime(); print('TOGGLES', ','.join(rt.info.toggles));"
            " print('CONFIGS', len(rt.info.subgroup_matrix_configs))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, **env_extra})
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_dawn_instance_toggles_on_by_default(rt):
    if rt.backend != "dawn":
        pytest.skip("Dawn instance toggles apply to the Dawn backend only")
    assert rt.info.toggles == ("allow_unsafe_apis", "vulkan_enable_f16_on_nvidia")
    assert "toggles: allow_unsafe_apis" in rt.describe()
    # lavapipe offers no subgroup matrices: none are reported, so no kernel picks them
    if "chromium-experimental-subgroup-matrix" not in rt.info.features:
        assert rt.info.subgroup_matrix_configs == ()


def test_dawn_toggles_switch_off_and_bad_value(monkeypatch):
    assert "TOGGLES \n" in _describe_in_subprocess({"TORCH_WEBGPU_DAWN_TOGGLES": "0",
                                                     "TORCH_WEBGPU_BACKEND": "dawn"})
    monkeypatch.setenv("TORCH_WEBGPU_DAWN_TOGGLES", "maybe")
    with pytest.raises(ValueError, match="TORCH_WEBGPU_DAWN_TOGGLES"):
        wanted_toggles()


def test_dawn_fast_toggles_drop_robustness_and_lazy_clears(monkeypatch):
    monkeypatch.setenv("TORCH_WEBGPU_DAWN_TOGGLES", "fast")
    enabled, disabled = wanted_toggles()
    assert "disable_robustness" in enabled and "lazy_clear_resource_on_first_use" in disabled
    # a real device with them computes like the default one
    script = ("import torch, torch_webgpu\n"
              "from torch_webgpu.runtime import get_runtime\n"
              "a = torch.arange(1000.0)\n"
              "b = (a.to('webgpu') * 2 + 1).sum().cpu()\n"
              "assert b.item() == (a * 2 + 1).sum().item(), b\n"
              "print('TOGGLES', ','.join(get_runtime().info.toggles))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "TORCH_WEBGPU_DAWN_TOGGLES": "fast"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert "disable_robustness" in out.stdout
