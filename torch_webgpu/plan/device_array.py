"""`DeviceArray`: a plan output kept on the device without torch, and `free_all`, which gives buffer ids
back to the runtime pool."""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from .dtypes import NUMPY_DTYPES, shape_nbytes


def free_all(rt: Any, owned: list[int]) -> None:
    """Free every buffer id in `owned` (ignoring a lost device) and empty the list."""
    for buf in owned:
        try:
            rt.free(buf)
        except Exception:  # device lost or interpreter shutting down: nothing left to free
            pass
    owned.clear()


class DeviceArray:
    """A plan output kept on the device without torch (`CompiledPlan.run_resident`): its own runtime
    buffer, which another call takes as an input zero-copy (a KV cache, logits for a device sampler)."""

    def __init__(self, rt: Any, buffer: int, shape: Sequence[int], dtype: str, offset: int = 0):
        self.rt, self.buffer, self.offset = rt, buffer, offset
        self.shape, self.dtype = tuple(int(d) for d in shape), dtype   # dtype: the device dtype's name
        self._finalizer = weakref.finalize(self, free_all, rt, [buffer])

    @property
    def nbytes(self) -> int:
        """Bytes of the array's elements."""
        return shape_nbytes(self.shape, self.dtype)

    def numpy(self) -> np.ndarray:
        """The array read back to the host."""
        size = -(-self.nbytes // 4) * 4
        raw = self.rt.download(self.buffer, self.offset, size) if size else b""
        count = math.prod(self.shape)
        return np.frombuffer(raw, dtype=NUMPY_DTYPES[self.dtype], count=count).copy().reshape(self.shape)

    def release(self) -> None:
        """Give the buffer back to the runtime pool now."""
        self._finalizer()

    def __repr__(self) -> str:
        return f"<DeviceArray {self.dtype}{list(self.shape)} in buffer {self.buffer}>"
