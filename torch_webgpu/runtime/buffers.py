"""Device buffers: a size-bucketed pool handing out integer buffer ids."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .errors import LimitExceededError, OutOfMemoryError

ALIGNMENT = 4  # copy and storage-access granularity of WebGPU buffers
_MIN_BUCKET = 256
_POW2_UP_TO = 32 << 20
_LARGE_STEP = 8 << 20


def align_up(n: int, alignment: int = ALIGNMENT) -> int:
    """`n` rounded up to a multiple of `alignment`."""
    return (n + alignment - 1) // alignment * alignment


def bucket_size(nbytes: int) -> int:
    """The pooled capacity serving a request: powers of two up to 32 MiB, then 8 MiB steps."""
    if nbytes <= _MIN_BUCKET:
        return _MIN_BUCKET
    if nbytes <= _POW2_UP_TO:
        return 1 << (nbytes - 1).bit_length()
    return align_up(nbytes, _LARGE_STEP)


# GPU buffer serials are unique in the process, not per pool: caches keyed by them (native buffer handles,
# bind groups) are shared by every Runtime, and two pools' serial 5 named different buffers (a crash).
_SERIALS = itertools.count(1)


@dataclass(slots=True)  # slots: built and read on every eager allocation
class DeviceBuffer:
    """One live allocation: `nbytes` requested, backed by a GPU buffer of `capacity` bytes."""

    id: int
    gpu: Any
    nbytes: int
    capacity: int
    serial: int  # identifies the GPU buffer object (stable across pool reuse) for bind-group caching

    @property
    def aligned_nbytes(self) -> int:
        """`nbytes` rounded up to whole 32-bit words: the range kernels and fills may touch."""
        return align_up(max(self.nbytes, ALIGNMENT))


@dataclass(slots=True)
class _Pooled:
    gpu: Any
    capacity: int
    serial: int


def _is_oom(exc: BaseException) -> bool:
    return "OutOfMemory" in type(exc).__name__ or "out of memory" in str(exc).lower()


class BufferPool:
    """Hands out buffer ids backed by pooled GPU buffers; freed buffers are reused by size bucket."""

    def __init__(self, device: Any, gpu_module: Any, limits: dict[str, int],
                 on_destroy: Callable[[int], None] | None = None,
                 on_release: Callable[[int], None] | None = None):
        self._device = device
        self._usage = (gpu_module.BufferUsage.STORAGE | gpu_module.BufferUsage.COPY_SRC
                       | gpu_module.BufferUsage.COPY_DST)
        self.max_buffer_size = int(limits.get("max-buffer-size", 256 << 20))
        self._on_destroy = on_destroy or (lambda serial: None)
        self._on_release = on_release or (lambda buffer_id: None)
        self.live_by_id: dict[int, DeviceBuffer] = {}   # every allocated buffer by its id
        # A released DeviceBuffer stands for its GPU buffer here (it has the same gpu/capacity/serial).
        self._free: dict[int, list[_Pooled | DeviceBuffer]] = defaultdict(list)
        # Captured graphs pin the GPU buffers their commands touch: one released while pinned is held
        # here, out of the free lists, until the last graph holding it lets go (so replays never write
        # memory that was handed to another tensor).
        self._pins: dict[int, int] = {}   # serial -> number of graphs pinning it
        self._held: dict[int, _Pooled | DeviceBuffer] = {}
        self.last_id = 0   # ids are never reused: every later allocation gets a larger one
        # ids freed by a foreign owner (the C++ allocator); called with all=False by allocate, which may
        # leave it the ids it keeps for replays of small outputs
        self.freed_source: Callable[[bool], Iterable[int]] | None = None
        self.allocated_bytes = 0
        self.max_allocated_bytes = 0
        self.reserved_bytes = 0
        self.created = 0

    def allocate(self, nbytes: int, exact: bool = False) -> DeviceBuffer:
        """A new buffer id with at least `nbytes` (rounded up to 4) of device memory. `exact`: backed by
        a buffer of just that size, not its size bucket (long-lived buffers such as a compiled plan's,
        where a bucket's slack up to 2x would be held for good); freed, it is reused by requests of that
        capacity only, until empty_cache."""
        source = self.freed_source  # drain_freed, inline: this runs for every eager output
        if source is not None:
            for buffer_id in source(False):
                self.release(buffer_id)
        if nbytes < 0:
            raise ValueError(f"buffer size must be non-negative, got {nbytes}")
        size = (nbytes + 3) & ~3 if nbytes > ALIGNMENT else ALIGNMENT
        if size > self.max_buffer_size:
            raise LimitExceededError(
                f"buffer of {nbytes} bytes exceeds this device's max-buffer-size "
                f"({self.max_buffer_size} bytes); split the tensor or use a smaller batch"
            )
        capacity = align_up(size, _MIN_BUCKET) if exact else bucket_size(size)
        if capacity > self.max_buffer_size:
            capacity = self.max_buffer_size
        free = self._free.get(capacity)
        pooled = free.pop() if free else self._create(capacity)
        self.last_id = buffer_id = self.last_id + 1
        buf = DeviceBuffer(buffer_id, pooled.gpu, nbytes, capacity, pooled.serial)
        self.live_by_id[buf.id] = buf
        allocated = self.allocated_bytes = self.allocated_bytes + capacity
        if allocated > self.max_allocated_bytes:
            self.max_allocated_bytes = allocated
        return buf

    def _create(self, capacity: int) -> _Pooled:
        for attempt in range(2):
            try:
                gpu = self._device.create_buffer(size=capacity, usage=self._usage, label="torch-webgpu")
                break
            except Exception as exc:
                if not _is_oom(exc):
                    raise
                if attempt == 1 or not self.empty_cache():
                    raise OutOfMemoryError(
                        f"WebGPU device out of memory allocating {capacity} bytes "
                        f"({self.allocated_bytes} bytes in use); free tensors or reduce the batch"
                    ) from exc
        self.reserved_bytes += capacity
        self.created += 1
        return _Pooled(gpu, capacity, next(_SERIALS))

    def get(self, buffer_id: int) -> DeviceBuffer:
        """The live buffer behind `buffer_id`."""
        try:
            return self.live_by_id[buffer_id]
        except KeyError:
            raise KeyError(f"webgpu buffer {buffer_id} is not allocated (freed or never created)") from None

    def release(self, buffer_id: int) -> None:
        """Return `buffer_id`'s memory to the pool; commands already recorded still see it in order."""
        buf = self.live_by_id.pop(buffer_id, None)
        if buf is None:
            return
        self._on_release(buffer_id)
        self.allocated_bytes -= buf.capacity
        if buf.serial in self._pins:
            self._held[buf.serial] = buf
        else:
            self._free[buf.capacity].append(buf)  # no new object on the eager hot path

    def pin(self, serial: int) -> None:
        """Keep the GPU buffer `serial` out of reuse after its id is released, until `unpin`."""
        self._pins[serial] = self._pins.get(serial, 0) + 1

    def unpin(self, serial: int) -> None:
        """Undo one `pin`; the buffer returns to the free lists if its id was released meanwhile."""
        count = self._pins.get(serial, 0) - 1
        if count > 0:
            self._pins[serial] = count
            return
        self._pins.pop(serial, None)
        pooled = self._held.pop(serial, None)
        if pooled is not None:
            self._free[pooled.capacity].append(pooled)

    @property
    def pinned(self) -> bool:
        """True while some captured graph pins buffers."""
        return bool(self._pins)

    @property
    def held_bytes(self) -> int:
        """Bytes of released buffers kept alive for captured graphs."""
        return sum(p.capacity for p in self._held.values())

    def drain_freed(self) -> None:
        """Release every id queued by a foreign owner (the C++ allocator's deleter queue and the ids it
        recycles)."""
        if self.freed_source is not None:
            for buffer_id in self.freed_source(True):
                self.release(buffer_id)

    def empty_cache(self) -> int:
        """Destroy all pooled free buffers; returns the bytes given back to the device."""
        released = 0
        for pooled_list in self._free.values():
            for pooled in pooled_list:
                self._on_destroy(pooled.serial)
                pooled.gpu.destroy()
                released += pooled.capacity
        self._free.clear()
        self.reserved_bytes -= released
        return released

    def live(self) -> list[DeviceBuffer]:
        """The live buffers."""
        return list(self.live_by_id.values())

    def __len__(self) -> int:
        return len(self.live_by_id)
