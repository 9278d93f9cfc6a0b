"""The open command encoder: dispatches and copies are recorded and submitted together."""

from __future__ import annotations

from time import perf_counter
from typing import Any

from torch_webgpu.config import FLUSH_MS

from .errors import ValidationError, WebGPUError
from .extension import handle

# Submit early past these so a long eager program does not grow one unbounded command buffer.
MAX_PENDING_COMMANDS = 2048
MAX_PENDING_STAGING_BYTES = 64 << 20


def flush_after_seconds(software: bool = False) -> float | None:
    """TORCH_WEBGPU_FLUSH_MS (default 0.5; off on `software` adapters): submit once the oldest unsubmitted
    command is that old, so the GPU runs the start of a long eager program while the host records the
    rest (a model's forward was otherwise one submit at its end: host time plus GPU time, never
    overlapped). ONNX Runtime's WebGPU EP submits every 16 dispatches for the same reason; an age rather
    than a count keeps a submit's cost (~20 us) small per op where ops record fast. A software adapter
    (lavapipe) runs the commands on the host's own cores, so there is nothing to overlap with. `0` or
    `off`: submit only at syncs and the size limits."""
    ms = FLUSH_MS.read(software)
    return None if ms is None else ms / 1e3


class CommandRecorder:
    """Keeps one encoder (and one compute pass) open until `submit`."""

    def __init__(self, device: Any, software: bool = False):
        self._device = device
        # The open encoder: its wgpudawn object (`_encoder`, made on first need) and/or its C handle
        # (`_handle`, 0 if not known). An encoder made in C++ (native_queue.new_encoder) lives as a bare
        # handle that this recorder owns (`_owned`) until Python needs the object, which then owns it.
        self._encoder = None
        self._handle = 0
        self._owned = False
        self._maker: Any = None   # the NativeQueue that made `_handle`'s encoder
        self._pass = None
        self._pipeline = None  # state of the open pass, to skip redundant set_* calls
        self._bind_group = None
        self._keepalive: list[Any] = []  # staging buffers referenced by recorded copies
        self.pending_commands = 0
        self.pending_staging_bytes = 0
        self.submits = 0
        self.commands = 0
        self.before_finish = None  # hook(encoder) run just before finish (profiler resolves)
        # A compute pass that native code (runtime/native_eager.py) keeps open on the encoder across
        # eager replays; `end_pass` ends it through this hook before anything else is recorded.
        self.native_pass_open = False
        self.end_native_pass: Any = None
        self.flush_after = flush_after_seconds(software)  # seconds, or None: no submit for age
        self._pending_since = 0.0  # when over_threshold first saw the open encoder's commands (0: not yet)
        # runtime/native_queue.py NativeQueue where the extension is loaded: finish + submit (+ wait) in C++.
        self.native_queue: Any = None

    @property
    def has_pending(self) -> bool:
        """True when something is recorded but not yet submitted."""
        return (self._encoder is not None or self._handle != 0) and self.pending_commands > 0

    @property
    def over_threshold(self) -> bool:
        """True when the open encoder should be submitted before recording more: past the size limits, or
        once its commands have waited `flush_after` seconds (timed from the first check that saw them)."""
        if (self.pending_commands >= MAX_PENDING_COMMANDS
                or self.pending_staging_bytes >= MAX_PENDING_STAGING_BYTES):
            return True
        if self.flush_after is None or not self.pending_commands:
            return False
        t = perf_counter()
        if not self._pending_since:
            self._pending_since = t
            return False
        return t - self._pending_since >= self.flush_after

    def encoder(self) -> Any:
        """The open encoder, outside any compute pass (for copies and clears)."""
        self.end_pass()
        if self._encoder is None:
            self._encoder = self._python_encoder()
        self.pending_commands += 1
        self.commands += 1
        return self._encoder

    def _python_encoder(self) -> Any:
        """The wgpudawn object of the open encoder (a C++-made one wrapped, its ownership moving to it)."""
        if self._handle:
            self._owned = False
            return self._maker.wrap_encoder(self._handle)
        return self._device.create_command_encoder(label="torch-webgpu")

    def _open_handle(self) -> int:
        """The open encoder's C handle, made in C++ (no Python object) when none is open."""
        if not self._handle:
            if self._encoder is None and self.native_queue is not None:
                self._maker = self.native_queue
                self._handle = self._maker.new_encoder()
                self._owned = True
            else:
                if self._encoder is None:
                    self._encoder = self._python_encoder()
                self._handle = handle(self._encoder)
        return self._handle

    def encoder_handle(self) -> int:
        """`encoder()` as a C handle, for C++ that records outside any pass (made in C++ if none is open
        and `native_queue` is set: no wgpudawn object)."""
        self.end_pass()
        self.pending_commands += 1
        self.commands += 1
        return self._open_handle()

    def compute_pass(self, timestamp_writes: dict | None = None) -> Any:
        """The open compute pass; a pass with timestamp writes is always a new, single-dispatch one."""
        if timestamp_writes is not None or self._pass is None:
            encoder = self.encoder()
            self.pending_commands -= 1
            self.commands -= 1
            kwargs = {"timestamp_writes": timestamp_writes} if timestamp_writes else {}
            self._pass = encoder.begin_compute_pass(**kwargs)
        self.pending_commands += 1
        self.commands += 1
        return self._pass

    def dispatch(self, pipeline: Any, bind_group: Any, counts: tuple[int, int, int],
                 timestamp_writes: dict | None = None) -> None:
        """Record a dispatch, skipping pipeline/bind-group calls that repeat the pass's current state."""
        fresh = timestamp_writes is not None or self._pass is None
        compute_pass = self.compute_pass(timestamp_writes)
        if fresh or pipeline is not self._pipeline:
            compute_pass.set_pipeline(pipeline)
            self._pipeline = pipeline
            self._bind_group = None
        if bind_group is not self._bind_group:
            compute_pass.set_bind_group(0, bind_group)
            self._bind_group = bind_group
        compute_pass.dispatch_workgroups(*counts)
        if timestamp_writes is not None:
            self.end_pass()

    def native_pass_encoder(self) -> int:
        """The open encoder's C handle (made in C++ if needed) with no Python pass open, for a native pass
        that stays open until `end_pass`; the caller counts the commands it records."""
        if self._pass is not None:
            self.end_pass()
        self.native_pass_open = True
        return self._open_handle()

    def end_pass(self) -> None:
        """Close the open compute pass (the next dispatch opens a new one)."""
        if self.native_pass_open:
            self.native_pass_open = False
            self.end_native_pass()
        if self._pass is not None:
            self._pass.end()
            self._pass = None
            self._pipeline = self._bind_group = None

    def keep_alive(self, obj: Any, nbytes: int = 0) -> None:
        """Hold `obj` (a staging buffer) until the commands using it are submitted."""
        self._keepalive.append(obj)
        self.pending_staging_bytes += nbytes

    def submitted_elsewhere(self) -> None:
        """The open encoder was finished and submitted by native code: start afresh."""
        self.native_pass_open = False  # program_run ended it before finishing
        if self._owned:
            self._maker.release_encoder(self._handle)
        self._handle, self._owned = 0, False
        self._encoder = self._pass = self._pipeline = self._bind_group = None
        self._keepalive.clear()
        self.pending_commands = 0
        self.pending_staging_bytes = 0
        self._pending_since = 0.0
        self.submits += 1

    def read_back(self, src: Any, offset: int, staging: Any, size: int) -> bytes:
        """Copy `size` bytes of GPU buffer `src` at `offset` into the MAP_READ buffer `staging` after
        everything recorded, submit it all and return the mapped bytes: one C++ call (native_queue only;
        no before_finish hook)."""
        encoder = self._encoder   # a wgpudawn object holds its encoder until finish has run
        handle = self.encoder_handle()
        owned = self._owned
        self._encoder, self._handle, self._owned = None, 0, False
        try:
            data = self.native_queue.read(handle, owned, src, offset, staging, size)
        finally:
            del encoder
            self._keepalive.clear()
            self.pending_commands = 0
            self.pending_staging_bytes = 0
            self._pending_since = 0.0
        self.submits += 1
        return data

    def submit(self, wait: bool = False) -> bool:
        """Finish and submit the open encoder; returns False when there was nothing to submit. `wait`
        (only with `native_queue`): the same C++ call then waits until the queue has done all submitted
        work, also when nothing was open."""
        encoder, handle, owned = self._encoder, self._handle, self._owned
        if encoder is None and not handle and not wait:
            return False
        opened = encoder is not None or handle != 0
        queue = self.native_queue
        if opened:
            self.end_pass()
            if encoder is None and (self.before_finish is not None or queue is None):
                encoder = self._python_encoder()   # the hook or Python's finish needs the wgpudawn object
                owned = False
            self._encoder, self._handle, self._owned = None, 0, False
            if self.before_finish is not None:
                self.before_finish(encoder)
        try:
            if queue is not None:
                if opened and not handle:
                    handle = queue.handle(encoder)
                queue.submit(handle, wait, owned)
            else:
                command_buffer = encoder.finish()
                self._device.queue.submit([command_buffer])
        except WebGPUError:
            raise
        except Exception as exc:
            raise ValidationError(f"command submission failed: {exc}") from exc
        finally:
            if opened:
                self._keepalive.clear()
                self.pending_commands = 0
                self.pending_staging_bytes = 0
                self._pending_since = 0.0
        if not opened:
            return False
        self.submits += 1
        return True
