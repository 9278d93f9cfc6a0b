"""Every environment variable torch-webgpu reads, in one table: name, parser, default, where it applies and
what it means (README's "Environment variables" table lists the same names in the same order:
tests/test_config.py checks both ways, and that no other module of torch_webgpu/ touches os.environ).

A leaf module (it imports nothing from torch_webgpu), so every layer may read its settings here. Nothing is
cached: `VARIABLE.read()` reads the environment when called, and the caller decides when that is — most
read per call, so that a test's monkeypatch.setenv takes effect at once; the few read once say so in
`applies`. A default that differs on software adapters (lavapipe, SwiftShader) is `software_default`, chosen
by the caller's `read(software=...)`; a default that needs more than that (the adapter's RAM, the caller's
floor) is empty here, read as None, and computed where the read happens. A bad value raises ConfigError, a
ValueError naming the variable and the values it accepts.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

T = TypeVar("T")

_ON = ("1", "on", "true", "yes")
_OFF = ("0", "off", "false", "no")


class ConfigError(ValueError):
    """An environment variable holds a value torch-webgpu does not accept (the message names both)."""


@dataclass(frozen=True)
class Variable(Generic[T]):
    """One environment variable: how its text becomes a value, its defaults, where it applies."""

    name: str
    parse: Callable[[str], T]     # the variable's text (or the default's) -> value; ValueError if bad
    accepted: str                 # the values it takes, as said in a ConfigError
    default: str                  # the text used when it is unset
    applies: str                  # who reads it, and when
    meaning: str                  # one line
    software_default: str | None = None   # the default on software adapters, where it differs

    def read(self, software: bool = False) -> T:
        """The variable's value now (its default, or its `software_default` on a software adapter, when
        unset); ConfigError naming it and what it accepts for a bad value."""
        text = os.environ.get(self.name)
        if text is None:
            text = self.software_default if software and self.software_default is not None else self.default
        try:
            return self.parse(text)
        except (ValueError, OverflowError):
            raise ConfigError(f"{self.name}={text!r}: expected {self.accepted}") from None


def _choice(choices: dict[str, str]) -> Callable[[str], str]:
    """A parser of one of `choices` (case and surrounding blanks ignored) -> its canonical name."""

    def parse(text: str) -> str:
        key = text.strip().lower()
        if key not in choices:
            raise ValueError(key)
        return choices[key]

    return parse


def _flag(empty: bool) -> Callable[[str], bool]:
    """A parser of an on/off switch: 1/on/true/yes, 0/off/false/no, and `empty` for ''."""

    def parse(text: str) -> bool:
        key = text.strip().lower()
        if key == "":
            return empty
        if key in _ON:
            return True
        if key in _OFF:
            return False
        raise ValueError(key)

    return parse


def _amount(off: tuple[str, ...]) -> Callable[[str], float | None]:
    """A parser of a non-negative finite number; None for a value in `off`."""

    def parse(text: str) -> float | None:
        key = text.strip().lower()
        if key in off:
            return None
        value = float(key)
        if not 0 <= value < math.inf:
            raise ValueError(key)
        return value

    return parse


def _whole_number(off: tuple[str, ...]) -> Callable[[str], int]:
    """A parser of a non-negative whole number; 0 for a value in `off`."""
    amount = _amount(off)

    def parse(text: str) -> int:
        value = amount(text)
        if value is not None and value != int(value):
            raise ValueError(text)
        return int(value or 0)

    return parse


def _spin(text: str) -> float:
    """Microseconds; 0 when empty."""
    return _amount(off=("",))(text) or 0.0


def _path(text: str) -> Path | None:
    """A directory or file; None when empty."""
    return Path(text) if text else None


def _text(text: str) -> str:
    """Free text, blanks around it dropped."""
    return text.strip()


def _subgroup_size(text: str) -> int | None:
    """None (unset: the adapter's own), 0 or a size."""
    key = text.strip()
    if not key:
        return None
    if not key.isdigit():
        raise ValueError(key)
    return int(key)


def _flop_count(text: str) -> int | None:
    """None (unset: the caller's floor) or a non-negative number like 1e6."""
    key = text.strip()
    if not key:
        return None
    value = float(key)
    if not 0 <= value < math.inf:
        raise ValueError(key)
    return int(value)


_BYTE_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _byte_count(text: str) -> int | None:
    """None (unset: the caller's default) or bytes like 4G, 512M, 4GiB or 1000000."""
    key = text.strip().upper().removesuffix("B").removesuffix("I")
    if not key:
        return None
    scale = _BYTE_UNITS.get(key[-1:], 1)
    value = float(key[:-1] if scale > 1 else key)
    if not 0 <= value < math.inf:
        raise ValueError(text)
    return int(value * scale)


def _fallback(text: str) -> bool:
    """csrc/aten.cpp's reading (exact text, no blanks dropped): only '0' turns the fallback off."""
    if text not in ("", "0", "1"):
        raise ValueError(text)
    return text != "0"


# ---- the table (README's order) ------------------------------------------------------------------
BACKEND = Variable(
    "TORCH_WEBGPU_BACKEND", _choice({"": "dawn", "dawn": "dawn", "wgpudawn": "dawn", "wgpu": "wgpu"}),
    "dawn or wgpu", "dawn", "runtime/backend.py, when a runtime opens",
    "the Python WebGPU binding: wgpudawn (Dawn) or wgpu-py (wgpu-native)")
ADAPTER = Variable(
    "TORCH_WEBGPU_ADAPTER", _text, "an adapter index or a substring of its name", "",
    "runtime/adapter.py, when a runtime opens",
    "which adapter the runtime opens (empty: the high-performance one)")
DAWN_PREFIX = Variable(
    "DAWN_PREFIX", _path, "the path of a Dawn installation", "",
    "the build only (tools/, CMake); torch_webgpu._C.dawn_prefix() reports the one built against",
    "a Dawn installation to build wgpudawn and the extension against (empty: the wheel's bundled Dawn)")
EXECUTOR = Variable(
    "TORCH_WEBGPU_EXECUTOR",
    _choice({"": "native", "native": "native", "python": "python", "check": "check"}),
    "native, python or check", "native", "runtime/native.py, per compiled plan",
    "what runs compiled plans and bundles: C++ (native), the Python reference, or both compared (check)")
NODE_MODULES = Variable(
    "TORCH_WEBGPU_NODE_MODULES", _path, "a node_modules directory", "", "web/, per page written",
    "where the chat page takes its npm packages' ES builds (empty: torch_webgpu/web/node_modules)")
PLAN_MEMORY = Variable(
    "TORCH_WEBGPU_PLAN_MEMORY", _flag(True), "1 or 0", "1", "plan/memory.py, per plan loaded",
    "buffers of a plan whose live ranges do not overlap share storage (0: one storage each)")
EAGER_LAUNCH = Variable(
    "TORCH_WEBGPU_EAGER_LAUNCH", _choice({"": "native", "native": "native", "python": "python"}),
    "native or python", "native",
    "ops/launch_cache.py at import (the C++ plan keys), runtime/native_eager.py per launch plan",
    "how replayed eager launch plans run: C++ keys and recording (native) or the Python reference")
FLUSH_MS = Variable(
    "TORCH_WEBGPU_FLUSH_MS", _amount(off=("0", "off", "none", "")), "milliseconds like 0.5, or 0/off", "0.5",
    "runtime/commands.py, when a command recorder is made",
    "submit the open command buffer once its oldest command is this old (0/off: only at syncs and limits)",
    software_default="off")
SYNC_SPIN_US = Variable(
    "TORCH_WEBGPU_SYNC_SPIN_US", _spin, "microseconds like 1000, or 0", "20000",
    "runtime/native_queue.py, when the native queue is made",
    "a wait for the queue polls this long before it blocks (0 or empty: block at once)",
    software_default="0")
PLAN_SPLIT = Variable(
    "TORCH_WEBGPU_PLAN_SPLIT", _whole_number(off=("", "off")),
    "a whole number of dispatches like 32, or 0/off", "32",
    "runtime/native_queue.py, when the native queue is made",
    "a compiled call keeping its outputs on the device submits every this many dispatches (0: once)",
    software_default="0")
SUBMIT = Variable(
    "TORCH_WEBGPU_SUBMIT", _choice({"": "native", "native": "native", "python": "python"}),
    "native or python", "native", "runtime/native_queue.py, when a runtime opens",
    "how the queue is finished, submitted and waited for: one C++ call (native) or wgpudawn's objects")
PIN_CLOCK = Variable(
    "TORCH_WEBGPU_PIN_CLOCK", _choice({"": "auto", "auto": "auto", "1": "on", "on": "on", "0": "off",
                                       "off": "off"}),
    "auto, 1 or 0", "auto", "runtime/clock_pin.py, when a runtime opens",
    "hold a CUDA primary context on NVIDIA GPUs so that bursty work runs at the full SM clock")
FALLBACK = Variable(
    "TORCH_WEBGPU_FALLBACK", _fallback, "1 or 0", "1",
    "csrc/aten.cpp (C++), per op without a kernel; checked here when the device registers",
    "ops without a WGSL kernel run on the CPU with a warning (0: they raise naming the op)")
MEMORY_LIMIT = Variable(
    "TORCH_WEBGPU_MEMORY_LIMIT", _byte_count, "a byte count like 4G or 512M", "",
    "device.py, once (the first allocation or get_device_properties)",
    "the byte budget for eager tensors (empty: half the host RAM on CPU adapters, unlimited on GPUs)")
CACHE_DIR = Variable(
    "TORCH_WEBGPU_CACHE_DIR", _path, "a directory", "", "compiler/cache.py and kernels/autotune.py, per use",
    "the on-disk compile cache (and the autotune cache beside it); empty: the user cache dir")
DUMP_DIR = Variable(
    "TORCH_WEBGPU_DUMP_DIR", _path, "a directory", "", "compiler/webgpu_compiler.py, per compiled graph",
    "write each compiled graph's IRs, WGSL, plan and dispatches.txt there (empty: nothing written)")
COMPILE_TIMING = Variable(
    "TORCH_WEBGPU_COMPILE_TIMING", _flag(False), "1 or 0", "0", "plan/phases.py, per compiled graph",
    "log each compiled graph's seconds per phase (logger torch_webgpu.plan.phases, INFO)")
LIBRARY = Variable(
    "TORCH_WEBGPU_LIBRARY", _flag(True), "1 or 0", "1", "compiler/library_plan.py, per compiled graph",
    "compiled graphs use the kernel library where a family matches (0: everything through IREE)")
GROUPED_GEMV = Variable(
    "TORCH_WEBGPU_GROUPED_GEMV", _flag(True), "1 or 0", "1",
    "compiler/families/grouped.py, per compiled graph",
    "decode-sized sibling linears run as one grouped dispatch (0: each its own)")
SUBGROUP_SIZE = Variable(
    "TORCH_WEBGPU_SUBGROUP_SIZE", _subgroup_size, "0 or a subgroup size like 8", "",
    "runtime/adapter.py, when a device opens",
    "0 hides the adapter's subgroups from compiled code; N declares one subgroup size N")
DAWN_TOGGLES = Variable(
    "TORCH_WEBGPU_DAWN_TOGGLES", _choice({**dict.fromkeys(_OFF, "0"), **dict.fromkeys(("", *_ON), "1"),
                                          "fast": "fast"}),
    "0, 1 or fast", "1", "runtime/adapter.py, once per process (Dawn's instance)",
    "Dawn instance toggles: 0 Dawn's defaults, 1 unsafe APIs and NVIDIA f16, fast also ONNX Runtime's")
AUTOTUNE = Variable(
    "TORCH_WEBGPU_AUTOTUNE", _choice({"": "auto", "auto": "auto", **dict.fromkeys(_ON, "on"),
                                      **dict.fromkeys(_OFF, "off")}),
    "auto, 1 or 0", "auto", "kernels/autotune.py, per problem chosen",
    "time kernel candidates on hardware adapters (auto), also on software ones (1), or never (0)")
AUTOTUNE_DIR = Variable(
    "TORCH_WEBGPU_AUTOTUNE_DIR", _path, "a directory", "", "kernels/autotune.py, per use",
    "where autotune.json is kept (empty: beside the compile cache)")
AUTOTUNE_MIN_FLOPS = Variable(
    "TORCH_WEBGPU_AUTOTUNE_MIN_FLOPS", _flop_count, "a FLOP count like 1e6", "",
    "kernels/autotune.py, per problem chosen",
    "smaller problems keep the default variant (empty: 2**28 for eager ops, 2**20 for plans)")
DAWN_LOG = Variable(
    "TORCH_WEBGPU_DAWN_LOG", _choice({"": "logging", "logging": "logging", "stderr": "stderr"}),
    "logging or stderr", "logging", "runtime/dawn_log.py, per adapter or device creation",
    "Dawn's messages go to the torch_webgpu.dawn logger, or are left on stderr")
VK_DRIVER_FILES = Variable(
    "VK_DRIVER_FILES", _text, "paths of Vulkan driver manifests", "",
    "the Vulkan loader (not torch-webgpu), when the first adapter is requested",
    "which Vulkan driver manifests the loader uses, e.g. NVIDIA's on a GPU machine")

VARIABLES: tuple[Variable, ...] = (
    BACKEND, ADAPTER, DAWN_PREFIX, EXECUTOR, NODE_MODULES, PLAN_MEMORY, EAGER_LAUNCH, FLUSH_MS, SYNC_SPIN_US,
    PLAN_SPLIT, SUBMIT, PIN_CLOCK, FALLBACK, MEMORY_LIMIT, CACHE_DIR, DUMP_DIR, COMPILE_TIMING, LIBRARY,
    GROUPED_GEMV, SUBGROUP_SIZE, DAWN_TOGGLES, AUTOTUNE, AUTOTUNE_DIR, AUTOTUNE_MIN_FLOPS, DAWN_LOG,
    VK_DRIVER_FILES,
)


@contextlib.contextmanager
def overridden(variable: Variable, text: str | None) -> Iterator[None]:
    """While the block runs, `variable` is set to `text` (or unset for None), then restored — for code that
    must hand a setting to readers below it, as compiler/export does TORCH_WEBGPU_DUMP_DIR."""
    old = os.environ.get(variable.name)
    if text is None:
        os.environ.pop(variable.name, None)
    else:
        os.environ[variable.name] = text
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(variable.name, None)
        else:
            os.environ[variable.name] = old

