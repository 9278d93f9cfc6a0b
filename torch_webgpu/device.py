"""The `webgpu` device: PrivateUse1 registration and the `torch.webgpu` device module.

`import torch_webgpu` calls `register()`, which renames PrivateUse1 to "webgpu", installs this module as
`torch.webgpu`, generates `Tensor.webgpu()` / `Module.webgpu()` / `Tensor.is_webgpu`, and hands the C++
allocator its runtime callbacks. The runtime (Dawn device) itself opens lazily, on the first allocation.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from . import _C, graphs  # noqa: F401  (torch.webgpu.graphs)
from .config import FALLBACK, MEMORY_LIMIT
from .device_state import default_generators, runtime  # noqa: F401  (torch.webgpu.default_generators)
from .graphs import (  # noqa: F401  (torch.webgpu.WebGPUGraph, graph, ...: the CUDA graphs API)
    GraphCaptureError,
    WebGPUGraph,
    graph,
    is_current_stream_capturing,
    make_graphed_callables,
)
from .runtime import OutOfMemoryError, WebGPUError, runtime_initialized, tensor_outputs
from .runtime.buffers import bucket_size

_memory_limit: int | None = None
_memory_limit_known = False


# ---- runtime wiring ------------------------------------------------------------------------------
def memory_limit() -> int | None:
    """The byte budget for webgpu tensors: TORCH_WEBGPU_MEMORY_LIMIT, else half the host RAM on CPU
    adapters (lavapipe allocates host memory), else None (the driver reports out-of-memory itself)."""
    global _memory_limit, _memory_limit_known
    if not _memory_limit_known:
        _memory_limit = MEMORY_LIMIT.read()
        if _memory_limit is None and runtime().info.software:
            _memory_limit = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
        _memory_limit_known = True
    return _memory_limit


def set_memory_limit(nbytes: int | None) -> int | None:
    """Set the byte budget for webgpu tensors (None = unlimited); returns the previous one."""
    global _memory_limit, _memory_limit_known
    previous = memory_limit()
    _memory_limit, _memory_limit_known = nbytes, True
    return previous


def _allocate(nbytes: int) -> int:
    """Allocator callback (GIL held): a runtime buffer id of `nbytes`, or torch.OutOfMemoryError."""
    rt = runtime()
    limit = _memory_limit if _memory_limit_known else memory_limit()
    # Pool reuse never grows the reserved bytes, so the budget needs checking only when it may be exceeded
    # (2n + 8 MiB bounds bucket_size(n) from above without computing it on every allocation).
    if limit is not None and rt.pool.reserved_bytes + 2 * nbytes + (8 << 20) > limit:
        need = bucket_size(nbytes)
        with rt.lock:
            rt.pool.drain_freed()
            if rt.pool.reserved_bytes + need > limit:
                rt.empty_cache()  # give pooled free buffers back before refusing
            if rt.pool.reserved_bytes + need > limit:
                raise OutOfMemoryError(
                    f"webgpu out of memory: allocating {nbytes} bytes with {rt.pool.allocated_bytes} bytes "
                    f"in use exceeds the memory limit of {limit} bytes (TORCH_WEBGPU_MEMORY_LIMIT); free "
                    f"tensors or reduce the batch")
    with rt.lock:
        return rt.pool.allocate(nbytes).id


def _copy(src_id: int, dst_id: int, nbytes: int) -> None:
    """Storage-resize callback: device-to-device copy of the first `nbytes` (a multiple of 4)."""
    runtime().copy(src_id, dst_id, nbytes)


def _synchronize() -> None:
    """Device-guard callback: wait for recorded work (no-op before the runtime exists)."""
    if runtime_initialized():
        runtime().synchronize()


# ---- the torch.webgpu device module --------------------------------------------------------------
def is_available() -> bool:
    """True if a WebGPU adapter can be opened."""
    try:
        runtime()
    except WebGPUError:  # no adapter, or one that refused to open a device
        return False
    return True


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """True: bfloat16 tensors are stored packed and computed in f32, as on CPU."""
    return True


def is_initialized() -> bool:
    """True once the WebGPU device has been opened."""
    return runtime_initialized()


def _lazy_init() -> None:
    """Open the WebGPU device now (it otherwise opens on first allocation)."""
    runtime()


def _is_in_bad_fork() -> bool:
    """Always False: the runtime does not survive fork, but torch's RNG helpers ask."""
    return False


def device_count() -> int:
    """1 if a WebGPU adapter is available, else 0 (one device per process: webgpu:0)."""
    return 1 if is_available() else 0


def current_device() -> int:
    """The current device index (always 0)."""
    return 0


def _check_index(device: Any) -> int:
    if device is None:
        return 0
    index = device if isinstance(device, int) else torch.device(device).index
    index = 0 if index is None else index
    if isinstance(device, (str, torch.device)) and torch.device(device).type != "webgpu":
        raise ValueError(f"expected a webgpu device, got {device!r}")
    if index != 0:
        raise ValueError(f"webgpu has one device (webgpu:0), got index {index}")
    return index


def set_device(device: Any) -> None:
    """Select the current device (only webgpu:0 exists)."""
    _check_index(device)


class device:  # noqa: N801 (mirrors torch.cuda.device)
    """Context manager selecting a webgpu device (only webgpu:0 exists)."""

    def __init__(self, device: Any):
        self.index = _check_index(device)

    def __enter__(self) -> device:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


def synchronize(device: Any = None) -> None:
    """Wait until all recorded webgpu work has finished."""
    _check_index(device)
    _synchronize()


def manual_seed(seed: int) -> None:
    """Seed the webgpu generator (Philox seed; the offset restarts at 0)."""
    default_generators[0].manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    """Seed every webgpu generator (there is one)."""
    manual_seed(seed)


def seed() -> None:
    """Seed the webgpu generator with a non-deterministic value."""
    default_generators[0].seed()


def seed_all() -> None:
    """Seed every webgpu generator non-deterministically."""
    seed()


def initial_seed() -> int:
    """The current seed of the webgpu generator."""
    return default_generators[0].initial_seed()


def get_rng_state(device: Any = "webgpu") -> torch.Tensor:
    """The generator state: a uint8 CPU tensor of 16 bytes (seed, Philox offset)."""
    _check_index(device)
    return default_generators[0].get_state()


def set_rng_state(new_state: torch.Tensor, device: Any = "webgpu") -> None:
    """Restore a state returned by get_rng_state."""
    _check_index(device)
    default_generators[0].set_state(new_state.to("cpu", torch.uint8))


def get_rng_state_all() -> list[torch.Tensor]:
    """States of all webgpu generators (one)."""
    return [get_rng_state()]


def set_rng_state_all(new_states: list[torch.Tensor]) -> None:
    """Restore states returned by get_rng_state_all."""
    set_rng_state(new_states[0])


def _stats() -> dict[str, int]:
    if not runtime_initialized():
        return {"allocated": 0, "max_allocated": 0, "reserved": 0, "live_buffers": 0, "graph_held": 0}
    return runtime().memory_stats()


def memory_allocated(device: Any = None) -> int:
    """Bytes held by live webgpu tensors (pool-bucket granularity)."""
    _check_index(device)
    return _stats()["allocated"]


def max_memory_allocated(device: Any = None) -> int:
    """Peak of memory_allocated() since start or reset_peak_memory_stats()."""
    _check_index(device)
    return _stats()["max_allocated"]


def memory_reserved(device: Any = None) -> int:
    """Bytes of device buffers held by the pool, in use or cached."""
    _check_index(device)
    return _stats()["reserved"]


def memory_stats(device: Any = None) -> dict[str, int]:
    """Allocated, peak, reserved bytes, live buffer count and bytes held for graphs of the webgpu pool."""
    _check_index(device)
    return dict(_stats())


def reset_peak_memory_stats(device: Any = None) -> None:
    """Reset max_memory_allocated() to the current allocation."""
    _check_index(device)
    if runtime_initialized():
        rt = runtime()
        with rt.lock:
            rt.pool.drain_freed()
            rt.pool.max_allocated_bytes = rt.pool.allocated_bytes


def empty_cache() -> None:
    """Give cached (unused) device buffers back to the device."""
    if runtime_initialized():
        rt = runtime()
        with rt.lock:
            rt.pool.drain_freed()
            rt.empty_cache()


@dataclass(frozen=True)
class DeviceProperties:
    """What torch.webgpu.get_device_properties returns."""

    name: str
    vendor: str
    backend: str
    adapter_type: str
    total_memory: int | None  # the byte budget enforced for webgpu tensors (None: unlimited)
    limits: dict[str, int] = field(default_factory=dict)
    features: frozenset[str] = frozenset()


def get_device_name(device: Any = None) -> str:
    """The adapter's name."""
    _check_index(device)
    return runtime().info.name


def get_device_properties(device: Any = None) -> DeviceProperties:
    """Adapter identity, limits, features and the memory budget."""
    _check_index(device)
    info = runtime().info
    return DeviceProperties(info.name, info.vendor, info.backend, info.adapter_type, memory_limit(),
                            dict(info.limits), frozenset(info.features))


@contextlib.contextmanager
def stream(*_: Any) -> Iterator[None]:
    """Streams do not exist on webgpu (one in-order queue); accepted for API compatibility."""
    yield


# ---- registration --------------------------------------------------------------------------------
_registered = False


def _install_host_printing() -> None:
    """Format webgpu tensors from one host copy, as torch does for xla/lazy/mtia tensors.

    torch's formatter otherwise runs ~50 small ops on the device and converts to float64, which WebGPU
    lacks. The repr still names device='webgpu:0'.
    """
    import torch._tensor_str as tensor_str

    original = tensor_str._tensor_str
    if getattr(original, "_webgpu_host_copy", False):
        return

    def _tensor_str(self: torch.Tensor, indent: int) -> str:
        if self.device.type == "webgpu":
            self = self.detach().to("cpu")
        return original(self, indent)

    _tensor_str._webgpu_host_copy = True  # type: ignore[attr-defined]
    tensor_str._tensor_str = _tensor_str


def register() -> None:
    """Rename PrivateUse1 to "webgpu", install torch.webgpu, generated methods and kernels (idempotent)."""
    global _registered
    if _registered:
        return
    import sys

    FALLBACK.read()   # csrc/aten.cpp reads it per op, taking any text but 0 as on: a bad value fails here
    if torch._C._get_privateuse1_backend_name() != "webgpu":
        torch.utils.rename_privateuse1_backend("webgpu")
    _C._set_runtime_callbacks(_allocate, _copy, _synchronize)
    tensor_outputs.install(_C._new_outputs)
    torch._register_device_module("webgpu", sys.modules[__name__])
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True)
    _install_host_printing()
    from . import ops  # noqa: F401  (registers the aten kernels)

    _registered = True
