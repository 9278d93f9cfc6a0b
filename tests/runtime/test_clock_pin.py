"""runtime/clock_pin: the runtime pins an NVIDIA GPU's clock with a CUDA primary context of its own, and
nothing else; here (lavapipe, no NVIDIA driver) it says why it does nothing."""

import dataclasses

import pytest

from torch_webgpu.runtime import clock_pin
from torch_webgpu.runtime.adapter import DeviceInfo

NVIDIA = DeviceInfo(backend="dawn", name="NVIDIA H100 80GB HBM3", vendor="nvidia", architecture="hopper",
                    adapter_type="DiscreteGPU", backend_type="Vulkan", description="NVIDIA 580.159.04")


def test_the_runtime_describes_its_clock_pin(rt):
    assert rt.clock_pin.state == "not needed (not an NVIDIA GPU)"
    assert not rt.clock_pin.pinned
    assert rt.describe().splitlines()[-1] == "  clock pin: not needed (not an NVIDIA GPU)"


def test_off_is_off_whatever_the_adapter(monkeypatch):
    monkeypatch.setenv(clock_pin.ENV, "0")
    pin, contexts = clock_pin.pin_clock(NVIDIA)
    assert pin.state == f"off ({clock_pin.ENV}=0)" and contexts == []


def test_an_nvidia_adapter_without_the_driver_library_is_left_as_it_is(monkeypatch):
    monkeypatch.delenv(clock_pin.ENV, raising=False)
    pin, contexts = clock_pin.pin_clock(NVIDIA)
    assert pin.state.startswith("unavailable: libcuda.so.1 cannot be loaded") and contexts == []


def test_asking_for_the_pin_where_it_cannot_apply_warns(monkeypatch):
    monkeypatch.setenv(clock_pin.ENV, "1")
    with pytest.warns(RuntimeWarning, match="the GPU clock cannot be pinned: libcuda.so.1"):
        pin, _ = clock_pin.pin_clock(NVIDIA)
    assert not pin.pinned


def test_software_adapters_are_never_pinned(monkeypatch):
    monkeypatch.setenv(clock_pin.ENV, "1")
    software = dataclasses.replace(NVIDIA, adapter_type="CPU")
    assert clock_pin.pin_clock(software)[0].state == "not needed (not an NVIDIA GPU)"


def test_a_bad_setting_names_the_variable(monkeypatch):
    monkeypatch.setenv(clock_pin.ENV, "sometimes")
    with pytest.raises(ValueError, match="TORCH_WEBGPU_PIN_CLOCK=.sometimes.: expected auto, 1 or 0"):
        clock_pin.pin_clock(NVIDIA)
