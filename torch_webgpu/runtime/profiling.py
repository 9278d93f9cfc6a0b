"""Per-dispatch GPU timing: timestamp queries when the device has them, wall clock otherwise."""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DispatchTiming:
    """How long one dispatch took on the GPU (`source` says how it was measured)."""

    label: str
    seconds: float
    source: str  # "timestamp" or "wall-clock"


class DispatchProfiler:
    """Collects one DispatchTiming per dispatch recorded while it is active."""

    def __init__(self, device: Any, gpu_module: Any, use_timestamps: bool, capacity: int = 2048):
        self.use_timestamps = use_timestamps
        self.timings: list[DispatchTiming] = []
        self._device = device
        self._wgpu = gpu_module
        self._pending: list[str] = []
        self._capacity = capacity
        self._query_set = None
        if use_timestamps:
            self._query_set = device.create_query_set(type="timestamp", count=2 * capacity)
            usage = gpu_module.BufferUsage
            self._resolve = device.create_buffer(
                size=16 * capacity, usage=usage.QUERY_RESOLVE | usage.COPY_SRC)
            self._readback = device.create_buffer(
                size=16 * capacity, usage=usage.MAP_READ | usage.COPY_DST)

    @property
    def full(self) -> bool:
        """True when the query set has no room for another dispatch before a submit."""
        return len(self._pending) >= self._capacity

    def timestamp_writes(self, label: str) -> dict | None:
        """The compute-pass timestamp writes for the next dispatch (None in wall-clock mode)."""
        if not self.use_timestamps:
            return None
        index = len(self._pending)
        self._pending.append(label)
        return {"query_set": self._query_set, "beginning_of_pass_write_index": 2 * index,
                "end_of_pass_write_index": 2 * index + 1}

    def before_finish(self, encoder: Any) -> None:
        """Record the query resolution into the encoder that is about to be submitted."""
        if self._pending:
            n = 2 * len(self._pending)
            encoder.resolve_query_set(self._query_set, 0, n, self._resolve, 0)
            encoder.copy_buffer_to_buffer(self._resolve, 0, self._readback, 0, 8 * n)

    def after_submit(self) -> None:
        """Read back the resolved timestamps of the submitted dispatches."""
        if not self._pending:
            return
        n = 2 * len(self._pending)
        self._readback.map_sync(self._wgpu.MapMode.READ, 0, 8 * n)
        raw = bytes(self._readback.read_mapped(0, 8 * n))
        self._readback.unmap()
        ticks = struct.unpack(f"<{n}Q", raw)
        for i, label in enumerate(self._pending):
            self.timings.append(DispatchTiming(label, max(0, ticks[2 * i + 1] - ticks[2 * i]) * 1e-9,
                                               "timestamp"))
        self._pending.clear()

    def wall_clock(self, label: str, seconds: float) -> None:
        """Record a dispatch timed on the host (submit + wait)."""
        self.timings.append(DispatchTiming(label, seconds, "wall-clock"))


def now() -> float:
    """A monotonic clock for wall-clock timings."""
    return time.perf_counter()
