"""Process-wide state of the webgpu device, shared by device.py and the aten kernels in ops/.

Both layers need the runtime with the C++ allocator's freed-id queue hooked into its buffer pool, and the
device's default random generator. They live here, below both, so the import arrows point one way:
ops/ -> device_state <- device.py (device.py registers ops/; ops/ never imports device.py).
"""

from __future__ import annotations

import threading

import torch

from . import _C
from .runtime import Runtime, get_runtime

_hook_lock = threading.Lock()
_hooked: Runtime | None = None


def runtime() -> Runtime:
    """The process-wide runtime, with the C++ allocator's freed-id queue feeding its buffer pool."""
    global _hooked
    rt = get_runtime()
    if _hooked is not rt:
        with _hook_lock:
            if _hooked is not rt:
                rt.pool.freed_source = _C._drain_freed
                _hooked = rt
    return rt


# The webgpu generators (one device): Philox seed and offset, advanced by the random kernels.
default_generators: tuple[torch.Generator, ...] = (_C._default_generator(),)
