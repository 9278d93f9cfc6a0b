"""Keep an NVIDIA GPU at its clock for WebGPU work that comes in bursts.

NVIDIA's driver raises the SM clock only while the GPU is busy (≥ ~85 % for a few hundred ms) or while a
CUDA context exists; otherwise an H100 idles at 345 MHz instead of 1,980 and a call that is over before the
driver reacts (one inference, a decode step, a short prompt) runs 3–4× slower
(`benchmarks/results/h100-2026-12-07-clock-probe.md`). A WebGPU process has no CUDA context, so on NVIDIA
adapters the runtime retains the device's CUDA *primary context* through the driver API — ctypes on
`libcuda.so.1`, part of every NVIDIA driver; no CUDA toolkit, no torch — for as long as the process lives.
It launches nothing; it costs the device memory of a context (about 0.5 GiB on an H100, before the limits
below shrink it).

`TORCH_WEBGPU_PIN_CLOCK`: `auto` (default: NVIDIA hardware adapters, where libcuda loads), `0` (never),
`1` (as auto, with a warning when it cannot apply).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import warnings
from dataclasses import dataclass
from typing import Any

from torch_webgpu.config import PIN_CLOCK

log = logging.getLogger(__name__)

ENV = PIN_CLOCK.name
NVIDIA_VENDOR_IDS = ("0x10de", "nvidia")
# cuCtxSetLimit: the context reserves per-thread stack (1 KiB × every resident thread), a printf FIFO and a
# device malloc heap for kernels that never run in it; the smallest the driver accepts keeps it cheap.
_LEAN_LIMITS = {0x00: 16, 0x01: 4096, 0x02: 4096}   # CU_LIMIT_STACK_SIZE, PRINTF_FIFO_SIZE, MALLOC_HEAP_SIZE


class ClockPinUnavailable(RuntimeError):
    """The CUDA driver API cannot hold a context here (no driver library, no such device, a failed call)."""


@dataclass(frozen=True)
class ClockPin:
    """What the runtime did about the clock: `state` is "pinned", "off", or why it does not apply."""

    state: str
    devices: tuple[str, ...] = ()

    @property
    def pinned(self) -> bool:
        """True while a CUDA primary context holds the clock up."""
        return self.state == "pinned"

    def describe(self) -> str:
        """One line for the runtime's description."""
        where = f" ({', '.join(self.devices)})" if self.devices else ""
        return f"clock pin: {self.state}{where}"


def _cuda_error(lib: Any, code: int) -> str:
    text = ctypes.c_char_p()
    with contextlib.suppress(Exception):
        lib.cuGetErrorString(code, ctypes.byref(text))
    return f"CUresult {code}" + (f" ({text.value.decode()})" if text.value else "")


class CudaPrimaryContext:
    """The retained primary CUDA context of device `ordinal` (driver API through ctypes, no torch)."""

    def __init__(self, ordinal: int = 0, lib: Any = None, lean: bool = True):
        self.lib = lib or load_libcuda()
        self.device, self.context = ctypes.c_int(), ctypes.c_void_p()
        self._call("cuDeviceGet", ctypes.byref(self.device), ordinal)
        self._call("cuDevicePrimaryCtxRetain", ctypes.byref(self.context), self.device)
        if lean:
            self._call("cuCtxPushCurrent_v2", self.context)
            try:
                for limit, value in _LEAN_LIMITS.items():
                    code = self.lib.cuCtxSetLimit(limit, ctypes.c_size_t(value))
                    if code != 0:
                        log.debug("cuCtxSetLimit(%#x, %d): %s", limit, value, _cuda_error(self.lib, code))
            finally:
                self.lib.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))

    def _call(self, name: str, *args: Any) -> None:
        code = getattr(self.lib, name)(*args)
        if code != 0:
            raise ClockPinUnavailable(f"{name} failed: {_cuda_error(self.lib, code)}")

    def release(self) -> None:
        """Give the primary context back (the driver destroys it with its last reference)."""
        release = getattr(self.lib, "cuDevicePrimaryCtxRelease_v2", None)   # the name since CUDA 11
        (release or self.lib.cuDevicePrimaryCtxRelease)(self.device)


def load_libcuda() -> Any:
    """libcuda.so.1 with cuInit done, or ClockPinUnavailable saying why not."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise ClockPinUnavailable(f"libcuda.so.1 cannot be loaded (no NVIDIA driver?): {exc}") from None
    code = lib.cuInit(0)
    if code != 0:
        raise ClockPinUnavailable(f"cuInit failed: {_cuda_error(lib, code)}")
    return lib


def _device_names(lib: Any) -> list[str]:
    count = ctypes.c_int()
    if lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return []
    names = []
    for ordinal in range(count.value):
        device, name = ctypes.c_int(), ctypes.create_string_buffer(256)
        lib.cuDeviceGet(ctypes.byref(device), ordinal)
        lib.cuDeviceGetName(name, 256, device)
        names.append(name.value.decode(errors="replace"))
    return names


def _is_nvidia_hardware(info: Any) -> bool:
    vendor = f"{getattr(info, 'vendor', '')} {getattr(info, 'name', '')}".lower()
    return any(v in vendor for v in NVIDIA_VENDOR_IDS) and not getattr(info, "software", False)


def policy() -> str:
    """The configured policy: "auto", "on" or "off" (ConfigError naming the variable otherwise)."""
    return PIN_CLOCK.read()


def pin_clock(info: Any) -> tuple[ClockPin, list[CudaPrimaryContext]]:
    """Retain the primary context of each CUDA device named like the adapter `info` (a DeviceInfo) where
    the policy allows; the contexts stay retained for as long as the caller keeps them."""
    mode = policy()
    if mode == "off":
        return ClockPin(f"off ({ENV}=0)"), []
    if not _is_nvidia_hardware(info):
        return ClockPin("not needed (not an NVIDIA GPU)"), []
    try:
        lib = load_libcuda()
        names = _device_names(lib)
        ordinals = [k for k, name in enumerate(names) if name == info.name] or (
            [0] if len(names) == 1 else [])
        if not ordinals:
            raise ClockPinUnavailable(f"no CUDA device is named {info.name!r} (CUDA sees {names})")
        contexts = [CudaPrimaryContext(k, lib) for k in ordinals]
    except ClockPinUnavailable as exc:
        if mode == "on":
            warnings.warn(f"{ENV}=1: the GPU clock cannot be pinned: {exc}", RuntimeWarning, stacklevel=3)
        return ClockPin(f"unavailable: {exc}"), []
    log.info("pinned the GPU clock with a CUDA primary context on %s", ", ".join(names[k] for k in ordinals))
    return ClockPin("pinned", tuple(f"cuda:{k} {names[k]}" for k in ordinals)), contexts
