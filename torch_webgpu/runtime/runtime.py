"""The Runtime: one WebGPU device with its buffer pool, kernel cache and open command encoder."""

from __future__ import annotations

import contextlib
import struct
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import builtin_kernels
from .adapter import DeviceInfo, open_device, select_adapter
from .backend import backend_name, load_backend
from .buffers import ALIGNMENT, BufferPool, DeviceBuffer, align_up, bucket_size
from .clock_pin import pin_clock
from .commands import CommandRecorder
from .dawn_log import dawn_messages_to_logging
from .errors import DeviceLostError, LimitExceededError, ValidationError
from .executables import ExecutableCache, Kernel
from .native_queue import native_queue
from .profiling import DispatchProfiler, DispatchTiming, now


class _LaunchRecordings(threading.local):
    """The launch recordings (runtime/capture.py `recording()`) open on this thread, outermost first."""

    def __init__(self) -> None:
        self.open: list[Any] = []


# Read by every dispatch: while empty (no recording open on this thread) a dispatch does no more work.
LAUNCH_RECORDINGS = _LaunchRecordings()


def unreplayable() -> None:
    """Mark every launch recording open on this thread as not replayable (the caller does work besides
    dispatches that a replay would miss)."""
    for capture in LAUNCH_RECORDINGS.open:
        capture.append(None)


@dataclass(frozen=True)
class BufferSlice:
    """A byte range of a buffer id, to bind or copy."""

    buffer_id: int
    offset: int = 0
    nbytes: int | None = None


@dataclass(frozen=True)
class Constant:
    """An immutable uniform buffer holding small kernel parameters (cached by content)."""

    gpu: Any
    serial: int
    nbytes: int


Binding = int | BufferSlice | Constant


def _as_bytes(data: Any) -> bytes | memoryview:
    if isinstance(data, np.ndarray):
        return memoryview(np.ascontiguousarray(data)).cast("B")
    if isinstance(data, (bytes, bytearray)):
        return data
    return memoryview(data).cast("B")


class Runtime:
    """Thread-safe access to one WebGPU device; every public method takes the runtime lock."""

    _MAX_CONSTANTS = 4096

    def __init__(self, backend: str | None = None, adapter: str | None = None):
        self.backend = backend or backend_name()
        self.wgpu = load_backend(self.backend)
        with dawn_messages_to_logging():   # Dawn's start-up notices: logger "torch_webgpu.dawn"
            self.device, self.info = open_device(select_adapter(self.wgpu, adapter), self.backend)
        # NVIDIA keeps the SM clock low for bursty work unless a CUDA context exists (clock_pin.py)
        self.clock_pin, self._clock_contexts = pin_clock(self.info)
        self.lock = threading.RLock()
        self.executables = ExecutableCache(self.device)
        self.pool = BufferPool(self.device, self.wgpu, self.info.limits, self.executables.forget_buffer,
                               self._forget_dispatch_bindings)
        # Fast path of dispatch: (kernel key, bindings as given) -> bind group, purged when an id is freed.
        self._bound: dict[tuple, Any] = {}
        self._bound_by_id: dict[int, list[tuple]] = {}
        self.executables.on_clear.append(self._forget_bound)
        self.recorder = CommandRecorder(self.device, self.info.software)
        self._staging: dict[int, list[Any]] = {}
        self._constants: OrderedDict[bytes, Constant] = OrderedDict()
        self._constant_serial = -1  # negative serials never collide with pool buffers
        self.profiler: DispatchProfiler | None = None   # the open rt.profile() block's, else None
        self._work_done_works = True
        self._fence: DeviceBuffer | None = None
        self.dispatches = 0
        # Host round trips, counted for benchmarks/eager_forward.py: uploads of host data, readbacks
        # (downloads) and waits for the queue (synchronize).
        self.uploads = 0
        self.readbacks = 0
        self.waits = 0
        self.max_storage_binding = self.info.limits.get("max-storage-buffer-binding-size", 128 << 20)
        self.max_workgroups = self.info.limits.get("max-compute-workgroups-per-dimension", 65535)
        # Both bindings keep the device-lost promise here; its state turns non-pending on loss.
        self._lost = getattr(self.device, "_lost_promise", None)
        # Checks of device-side error flags, run once the queue has been waited on (synchronize, a
        # download): like CUDA's device-side asserts, an error found on the GPU surfaces at the next sync.
        self._after_wait: list[Any] = []
        # The open graph capture (runtime/capture.py CommandCapture), or None: the recording entry points
        # below note every command in it, and refuse uploads, readbacks and waits.
        self.capture: Any = None
        self.recorder.native_queue = self._native_queue()

    def _native_queue(self) -> Any:
        return native_queue(self.backend, self.device, self.info.software, self.raise_if_lost)

    # ---- introspection -------------------------------------------------------------------------
    def describe(self) -> str:
        """Adapter, backend, limits and features of the open device, and the clock pin."""
        return f"{self.info.describe()}\n  {self.clock_pin.describe()}"

    @property
    def submits(self) -> int:
        """How many command buffers were submitted so far."""
        return self.recorder.submits

    @property
    def profiling(self) -> bool:
        """True inside `profile()` (dispatches are timed one by one)."""
        return self.profiler is not None

    def check_alive(self) -> None:
        """Raise DeviceLostError if the device was lost."""
        state = getattr(self._lost, "_state", "pending") if self._lost is not None else "pending"
        if state != "pending":
            info = None
            with contextlib.suppress(Exception):
                info = self._lost.sync_wait()
            reason = getattr(info, "reason", "unknown")
            message = getattr(info, "message", "")
            raise DeviceLostError(f"WebGPU device lost ({reason}): {message}; restart the process")

    def raise_if_lost(self) -> None:
        """`check_alive` after the binding has delivered its pending callbacks: Dawn reports a loss through
        a callback that runs only when events are processed, so error paths (a failed submission) call
        this to raise DeviceLostError rather than a validation error about a lost device."""
        if self.backend == "dawn":
            with contextlib.suppress(Exception):
                from wgpudawn.backends.dawn._api import process_events

                process_events()
        self.check_alive()

    # ---- buffers -------------------------------------------------------------------------------
    def allocate(self, nbytes: int, exact: bool = False) -> int:
        """A new device buffer id of at least `nbytes` bytes (contents undefined); `exact`: no size-bucket
        slack (BufferPool.allocate), for long-lived buffers."""
        with self.lock:
            return self.pool.allocate(nbytes, exact).id

    def free(self, buffer_id: int) -> None:
        """Give `buffer_id` back to the pool."""
        with self.lock:
            self.pool.release(buffer_id)

    def buffer(self, buffer_id: int) -> DeviceBuffer:
        """The DeviceBuffer behind an id."""
        with self.lock:
            return self.pool.get(buffer_id)

    def upload(self, buffer_id: int, data: Any, offset: int = 0) -> None:
        """Write host bytes (bytes, memoryview or numpy array) into a buffer at `offset`."""
        payload = _as_bytes(data)
        n = len(payload)
        if n == 0:
            return
        with self.lock:
            if self.capture is not None:
                self.capture.refuse("upload", f"{n} bytes into buffer {buffer_id}")
            buf = self.pool.get(buffer_id)
            self._check_range(buf, offset, n, "upload")
            self.uploads += 1
            start, end = offset - offset % ALIGNMENT, align_up(offset + n)
            if (start, end) != (offset, offset + n):
                # Sub-word edges: merge with the bytes around them so neighbours are preserved.
                merged = bytearray(self._download_locked(buf, start, end - start))
                merged[offset - start:offset - start + n] = payload
                payload, offset = bytes(merged), start
            if self.recorder.has_pending:
                # Keep program order: a queue write would land before the recorded commands.
                staging = self.device.create_buffer_with_data(
                    data=payload, usage=self.wgpu.BufferUsage.COPY_SRC)
                self.recorder.encoder().copy_buffer_to_buffer(staging, 0, buf.gpu, offset, len(payload))
                self.recorder.keep_alive(staging, len(payload))
                self._maybe_submit()
            else:
                self.device.queue.write_buffer(buf.gpu, offset, payload)

    def download(self, buffer_id: int, offset: int = 0, nbytes: int | None = None) -> bytes:
        """Read bytes back from the device (submits everything recorded so far)."""
        with self.lock:
            buf = self.pool.get(buffer_id)
            nbytes = buf.nbytes - offset if nbytes is None else nbytes
            self._check_range(buf, offset, nbytes, "download")
            if nbytes == 0:
                return b""
            return self._download_locked(buf, offset, nbytes)

    def download_array(self, buffer_id: int, dtype: Any, count: int, offset: int = 0) -> np.ndarray:
        """Read `count` elements of `dtype` starting at byte `offset` as a numpy array."""
        dtype = np.dtype(dtype)
        raw = self.download(buffer_id, offset, count * dtype.itemsize)
        return np.frombuffer(raw, dtype=dtype, count=count).copy()

    def _download_locked(self, buf: DeviceBuffer, offset: int, nbytes: int) -> bytes:
        if self.capture is not None:
            self.capture.refuse("download", f"{nbytes} bytes of buffer {buf.id}")
        start, end = offset - offset % ALIGNMENT, align_up(offset + nbytes)
        size = end - start
        staging = self._take_staging(size)
        self.readbacks += 1
        if self.recorder.native_queue is not None and self.profiler is None:
            # copy, finish, submit, map and wait in one C++ call (runtime/native_queue.py NativeQueue.read)
            self.check_alive()
            try:
                data = self.recorder.read_back(buf.gpu, start, staging, size)
            except ValidationError:
                self.raise_if_lost()
                raise
            self._staging.setdefault(bucket_size(size), []).append(staging)
            self._run_after_wait()
            return data[offset - start:offset - start + nbytes] if (start, size) != (offset, nbytes) else data
        self.recorder.encoder().copy_buffer_to_buffer(buf.gpu, start, staging, 0, size)
        self._submit_locked()
        try:
            staging.map_sync(self.wgpu.MapMode.READ, 0, size)
        except Exception as exc:
            self.check_alive()
            raise ValidationError(f"reading back buffer {buf.id} failed: {exc}") from exc
        data = bytes(staging.read_mapped(0, size))
        staging.unmap()
        self._staging.setdefault(bucket_size(size), []).append(staging)
        self._run_after_wait()
        return data[offset - start:offset - start + nbytes]

    def after_wait(self, check: Any) -> None:
        """Run `check()` after the next wait for the queue (it may download; it raises to report)."""
        with self.lock:
            if check not in self._after_wait:
                self._after_wait.append(check)

    def _run_after_wait(self) -> None:
        while self._after_wait:
            self._after_wait.pop(0)()

    def _take_staging(self, size: int) -> Any:
        bucket = bucket_size(size)
        free = self._staging.get(bucket)
        if free:
            return free.pop()
        usage = self.wgpu.BufferUsage.MAP_READ | self.wgpu.BufferUsage.COPY_DST
        try:
            return self.device.create_buffer(size=bucket, usage=usage, label="torch-webgpu-readback")
        except Exception:   # the binding's own error: on a lost device, say so
            self.raise_if_lost()
            raise

    def fill(self, buffer_id: int, pattern: int = 0, offset: int = 0, nbytes: int | None = None) -> None:
        """Fill a byte range with a repeated 32-bit `pattern` whose first byte lands at `offset` (0 on
        a 4-byte-aligned range uses clear_buffer; unaligned ends keep their neighbours' bytes)."""
        with self.lock:
            buf = self.pool.get(buffer_id)
            nbytes = buf.aligned_nbytes - offset if nbytes is None else nbytes
            self._check_range(buf, offset, nbytes, "fill", buf.aligned_nbytes)
            if nbytes == 0:
                return
            # launch plans do not replay fills (a zero fill is a clear command, which they cannot hold)
            unreplayable()
            if offset % ALIGNMENT or nbytes % ALIGNMENT:
                self._fill_bytes(buffer_id, pattern, offset, nbytes)
                return
            if pattern == 0:
                self.recorder.encoder().clear_buffer(buf.gpu, offset, nbytes)
                if self.capture is not None:
                    self.capture.clear(buf, offset, nbytes)
                self._maybe_submit()
                return
            self.dispatch(*self.fill_launch(buffer_id, pattern, offset, nbytes))

    def fill_launch(self, buffer_id: int, pattern: int, offset: int,
                    nbytes: int) -> tuple[Kernel, list[Binding], tuple[int, int, int]]:
        """Kernel, bindings and grid of the dispatch that fills an aligned range with a non-zero pattern."""
        words = nbytes // 4
        rows = -(-words // builtin_kernels.FILL_WORKGROUP)
        grid_x = min(rows, self.max_workgroups)
        grid_y = -(-rows // grid_x)
        row_words = grid_x * builtin_kernels.FILL_WORKGROUP
        params = struct.pack("<4I", offset // 4, words, pattern & 0xFFFFFFFF, row_words)
        kernel = self.kernel(builtin_kernels.FILL_U32, label="torch-webgpu-fill")
        bindings: list[Binding] = [BufferSlice(buffer_id, 0, offset + nbytes), self.constant(params)]
        return kernel, bindings, (grid_x, grid_y, 1)

    def _fill_bytes(self, buffer_id: int, pattern: int, offset: int, nbytes: int) -> None:
        first, end = offset // 4, offset + nbytes
        words = -(-end // 4) - first
        rotate = 8 * (offset % 4)   # the pattern's byte k lands at offset + k (mod 4)
        value = ((pattern << rotate) | (pattern >> (32 - rotate))) & 0xFFFFFFFF if rotate else pattern
        rows = -(-words // builtin_kernels.FILL_WORKGROUP)
        grid_x = min(rows, self.max_workgroups)
        grid_y = -(-rows // grid_x)
        params = struct.pack("<8I", first, words, value & 0xFFFFFFFF, grid_x * builtin_kernels.FILL_WORKGROUP,
                             offset, end, 0, 0)
        kernel = self.kernel(builtin_kernels.FILL_BYTES, label="torch-webgpu-fill-bytes")
        self.dispatch(kernel, [BufferSlice(buffer_id, 0, align_up(end)), self.constant(params)],
                      (grid_x, grid_y, 1))

    def copy(self, src: int, dst: int, nbytes: int | None = None, src_offset: int = 0,
             dst_offset: int = 0) -> None:
        """Device-to-device copy of a 4-byte-aligned byte range."""
        with self.lock:
            s, d = self.pool.get(src), self.pool.get(dst)
            nbytes = s.aligned_nbytes - src_offset if nbytes is None else nbytes
            self._check_range(s, src_offset, nbytes, "copy source", s.aligned_nbytes)
            self._check_range(d, dst_offset, nbytes, "copy destination", d.aligned_nbytes)
            if (src_offset | dst_offset | nbytes) % ALIGNMENT:
                raise ValueError("copy offsets and size must be multiples of 4 bytes")
            if nbytes:
                self.recorder.encoder().copy_buffer_to_buffer(s.gpu, src_offset, d.gpu, dst_offset, nbytes)
                if self.capture is not None:
                    self.capture.copy(s, src_offset, d, dst_offset, nbytes)
                self._maybe_submit()

    def constant(self, data: bytes) -> Constant:
        """An immutable uniform buffer with `data` (padded to 16 bytes), cached by content."""
        data = bytes(data) + b"\0" * (-len(data) % 16)
        with self.lock:
            const = self._constants.get(data)
            if const is not None:
                self._constants.move_to_end(data)
                return const
            usage = self.wgpu.BufferUsage.UNIFORM | self.wgpu.BufferUsage.STORAGE
            gpu = self.device.create_buffer_with_data(data=data, usage=usage)
            const = Constant(gpu, self._constant_serial, len(data))
            self._constant_serial -= 1
            self._constants[data] = const
            if len(self._constants) > self._MAX_CONSTANTS:
                _, old = self._constants.popitem(last=False)
                self.executables.forget_buffer(old.serial)
            return const

    @staticmethod
    def _check_range(buf: DeviceBuffer, offset: int, nbytes: int, what: str,
                     limit: int | None = None) -> None:
        limit = buf.nbytes if limit is None else limit
        if offset < 0 or nbytes < 0 or offset + nbytes > limit:
            raise ValueError(f"{what} of {nbytes} bytes at offset {offset} is outside buffer {buf.id} "
                             f"({limit} bytes)")

    # ---- kernels -------------------------------------------------------------------------------
    def kernel(self, wgsl: str, entry_point: str = "main", label: str | None = None,
               constants: dict[str, float] | None = None) -> Kernel:
        """A compute pipeline from WGSL, built once per content hash."""
        with self.lock:
            return self.executables.kernel(wgsl, entry_point, label, constants)

    def kernel_from_spirv(self, spirv: bytes, entry_point: str | None = "main",
                          label: str | None = None) -> Kernel:
        """A compute pipeline from SPIR-V bytes (used to cross-check our WGSL against IREE's SPIR-V)."""
        with self.lock:
            return self.executables.kernel(bytes(spirv), entry_point, label)

    def dispatch(self, kernel: Kernel, bindings: Sequence[Binding], workgroups: Sequence[int],
                 label: str | None = None) -> None:
        """Record one dispatch of `kernel` with bindings 0..n-1 of group 0 into the open encoder."""
        counts = tuple(int(c) for c in workgroups) + (1,) * (3 - len(workgroups))
        if max(counts) > self.max_workgroups:
            raise LimitExceededError(
                f"kernel '{kernel.label}': workgroup count {counts} exceeds the device's "
                f"max-compute-workgroups-per-dimension ({self.max_workgroups})")
        if min(counts) == 0:
            return   # records nothing, so no recording notes it (a replay needs none)
        name = label or kernel.label
        with self.lock:
            key = (kernel.key, tuple(bindings))
            bind_group = self._bound.get(key)
            if bind_group is None:
                bind_group = self._bind(kernel, key, name)
            if self.capture is not None:
                self.capture.dispatch(kernel, bindings, counts, name)
            self.record_bound(kernel.pipeline, bind_group, counts, name)
            recordings = LAUNCH_RECORDINGS.open
            if recordings:
                self._note_launch(recordings, kernel, bindings, workgroups, label)

    def _note_launch(self, recordings: list[Any], kernel: Kernel, bindings: Sequence[Binding],
                     workgroups: Sequence[int], label: str | None) -> None:
        """Append a recorded dispatch to every open launch recording (runtime/capture.py `Capture`), with
        what each buffer binding bound and the bytes of its buffers now: a temporary buffer is gone by the
        time a launch plan is built."""
        entry = (kernel, tuple(bindings), tuple(workgroups), label)
        ranges = tuple(None if isinstance(b, Constant) else self._resource(b, kernel)[2:] for b in bindings)
        sizes = {bid: self.pool.get(bid).nbytes
                 for bid in (b if type(b) is int else b.buffer_id for b in bindings
                             if type(b) is int or isinstance(b, BufferSlice))}
        for capture in recordings:
            capture.append(entry)
            capture.ranges.append(ranges)
            capture.sizes.update(sizes)

    def record_bound(self, pipeline: Any, bind_group: Any, counts: tuple[int, int, int], label: str) -> None:
        """Record a dispatch of a pipeline with a prepared bind group (timed inside `profile()`); the
        caller holds the lock and has checked `counts`."""
        profiler = self.profiler
        if profiler is not None and profiler.use_timestamps and profiler.full:
            self._submit_locked()
        writes = profiler.timestamp_writes(label) if profiler is not None else None
        self.recorder.dispatch(pipeline, bind_group, counts, writes)
        self.dispatches += 1
        if profiler is not None and not profiler.use_timestamps:
            start = now()
            self._submit_locked(wait=True)
            profiler.wall_clock(label, now() - start)
        else:
            self._maybe_submit()

    def _bind(self, kernel: Kernel, key: tuple, label: str) -> Any:
        bindings = key[1]
        resources = tuple([self._resource(b, kernel) for b in bindings])
        try:
            bind_group = self.executables.bind_group(kernel, 0, resources)
        except ValidationError as exc:
            if label == kernel.label:
                raise
            raise ValidationError(f"dispatch '{label}': {exc}") from exc
        if len(self._bound) >= self.executables.max_bind_groups:
            self._forget_bound()
        self._bound[key] = bind_group
        for b in bindings:
            buffer_id = b if type(b) is int else getattr(b, "buffer_id", None)
            if buffer_id is not None:
                self._bound_by_id.setdefault(buffer_id, []).append(key)
        return bind_group

    def _forget_bound(self) -> None:
        self._bound.clear()
        self._bound_by_id.clear()

    def _forget_dispatch_bindings(self, buffer_id: int) -> None:
        for key in self._bound_by_id.pop(buffer_id, ()):
            self._bound.pop(key, None)

    def binding_resource(self, binding: Binding, kernel: Kernel) -> tuple:
        """(gpu buffer, serial, offset, size) that `binding` binds for `kernel` (range-checked)."""
        with self.lock:
            return self._resource(binding, kernel)

    def _resource(self, binding: Binding, kernel: Kernel) -> tuple:
        if type(binding) is int:
            # Fast path (every eager output is a fresh id): a whole buffer within the binding limit.
            buf = self.pool.get(binding)
            nbytes = buf.aligned_nbytes
            if nbytes <= self.max_storage_binding:
                return (buf.gpu, buf.serial, 0, nbytes)
        if isinstance(binding, Constant):
            return (binding.gpu, binding.serial, 0, binding.nbytes)
        if isinstance(binding, int):
            binding = BufferSlice(binding)
        buf = self.pool.get(binding.buffer_id)
        nbytes = buf.aligned_nbytes - binding.offset if binding.nbytes is None else binding.nbytes
        self._check_range(buf, binding.offset, nbytes, f"binding of kernel '{kernel.label}'",
                          buf.aligned_nbytes)
        if nbytes > self.max_storage_binding:
            raise LimitExceededError(
                f"kernel '{kernel.label}': binding of {nbytes} bytes exceeds the device's "
                f"max-storage-buffer-binding-size ({self.max_storage_binding}); split the tensor")
        return (buf.gpu, buf.serial, binding.offset, align_up(max(nbytes, ALIGNMENT)))

    # ---- submission ----------------------------------------------------------------------------
    def _maybe_submit(self) -> None:
        if self.recorder.over_threshold:
            self._submit_locked()

    def _submit_locked(self, wait: bool = False) -> None:
        if wait and self.capture is not None:
            self.capture.refuse("synchronize")
        self.waits += wait
        self.check_alive()
        profiler = self.profiler
        recorder = self.recorder
        recorder.before_finish = profiler.before_finish if profiler is not None else None
        # Natively, finishing, submitting and waiting are one C++ call (runtime/native_queue.py NativeQueue).
        native_wait = wait and recorder.native_queue is not None
        try:
            submitted = recorder.submit(native_wait)
        except ValidationError:
            self.raise_if_lost()   # "device is lost" errors become DeviceLostError
            raise
        if submitted and profiler is not None:
            profiler.after_submit()
        if wait:
            if not native_wait:
                self._wait_idle()
            self.check_alive()
            self._run_after_wait()

    def _wait_idle(self) -> None:
        if self._work_done_works:
            try:
                self.device.queue.on_submitted_work_done_sync()
                return
            except TypeError:
                # wgpu 0.32.0's cffi signature for this callback is broken on wgpu-native.
                self._work_done_works = False
            except Exception as exc:   # the binding's own error types (a lost device, ...)
                self.raise_if_lost()
                raise ValidationError(f"waiting for the queue failed: {exc}") from exc
        # Mapping a buffer written by the queue completes only after all earlier submissions.
        if self._fence is None:
            self._fence = self.pool.allocate(4)
        self._download_locked(self._fence, 0, 4)

    def flush(self) -> None:
        """Submit everything recorded so far without waiting."""
        with self.lock:
            self._submit_locked()

    def synchronize(self) -> None:
        """Submit everything recorded so far and wait for the GPU to finish it."""
        with self.lock:
            self._submit_locked(wait=True)

    @contextlib.contextmanager
    def profile(self) -> Iterator[list[DispatchTiming]]:
        """Time every dispatch recorded inside the block; the list fills when the block ends."""
        timings: list[DispatchTiming] = []
        with self.lock:
            self._submit_locked(wait=True)
            use_ts = "timestamp-query" in self.info.features
            self.profiler = DispatchProfiler(self.device, self.wgpu, use_ts)
        try:
            yield timings
        finally:
            with self.lock:
                self._submit_locked(wait=True)
                timings.extend(self.profiler.timings)
                self.profiler = None

    # ---- memory statistics ---------------------------------------------------------------------
    def memory_stats(self) -> dict[str, int]:
        """Bytes allocated (live ids), peak allocated, reserved by the pool, and held for captured graphs
        (buffers freed while a graph's commands still use them)."""
        with self.lock:
            self.pool.drain_freed()
            return {"allocated": self.pool.allocated_bytes, "max_allocated": self.pool.max_allocated_bytes,
                    "reserved": self.pool.reserved_bytes, "live_buffers": len(self.pool),
                    "graph_held": self.pool.held_bytes}

    def empty_cache(self) -> None:
        """Return unused pooled buffers to the device."""
        with self.lock:
            self._submit_locked(wait=True)
            self.pool.empty_cache()
            self._staging.clear()


_runtime: Runtime | None = None
_runtime_lock = threading.Lock()


def get_runtime() -> Runtime:
    """The process-wide Runtime, created on first use."""
    global _runtime
    if _runtime is None:
        with _runtime_lock:
            if _runtime is None:
                _runtime = Runtime()
    return _runtime


def runtime_initialized() -> bool:
    """True once get_runtime() has opened the device."""
    return _runtime is not None


def device_info() -> DeviceInfo:
    """The DeviceInfo of the process-wide runtime."""
    return get_runtime().info
