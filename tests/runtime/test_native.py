"""Native command programs (runtime/native.py + csrc/native_plan): recorded from C++ into the runtime's
encoder, on the runtime's own buffers, with per-call slots and bind groups made only for slot buffers not
among a dispatch's recent ones."""

import numpy as np
import pytest

from torch_webgpu.runtime import BufferSlice, ValidationError, extension
from torch_webgpu.runtime import native as nat
from torch_webgpu.runtime import native_queue as nq

from .add_one import ADD_ONE, N, f32_buffer


@pytest.fixture(scope="module")
def native_rt(rt):
    if not nat.native_available(rt):
        pytest.fail(f"native executor unavailable: {nat.unavailable_reason()}")
    return rt



def _program(rt, out, copy_to):
    """dst = slot0 + 1 into `out`, then out copied into `copy_to`, whose last word is cleared."""
    b = nat.ProgramBuilder(rt)
    b.dispatch(rt.kernel(ADD_ONE, label="add-one"), [nat.Slot(0, 0, 4 * N), BufferSlice(out, 0, 4 * N)], (1,))
    b.copy(BufferSlice(out), BufferSlice(copy_to), 4 * N)
    b.clear(BufferSlice(copy_to, 4 * (N - 1)), 4)
    return b.build()


def test_program_records_dispatch_copy_and_clear_with_per_call_slots(native_rt):
    rt = native_rt
    a, b = f32_buffer(rt, np.arange(N)), f32_buffer(rt, -np.arange(N))
    out, copied = rt.allocate(4 * N), rt.allocate(4 * N)
    program = _program(rt, out, copied)
    assert program.dispatches == 1 and program.commands == 3
    with rt.lock:
        program.record((*nat.buffer_slot(rt, a),))
    want = np.arange(N, dtype=np.float32) + 1
    np.testing.assert_array_equal(rt.download_array(out, np.float32, N), want)
    np.testing.assert_array_equal(rt.download_array(copied, np.float32, N), np.r_[want[:-1], 0])
    with rt.lock:
        program.record((*nat.buffer_slot(rt, b),))
        program.record((*nat.buffer_slot(rt, b),))   # same slot: the bind group is reused
    np.testing.assert_array_equal(rt.download_array(out, np.float32, N), 1 - np.arange(N, dtype=np.float32))
    info = program.info()
    assert info["runs"] == 3 and info["slots"] == 1 and info["bind_groups_created"] == 2


def test_alternating_slots_reuse_their_bind_groups_and_the_oldest_is_replaced(native_rt):
    """`y = f(x)` in a loop alternates f's output between two buffers: each keeps its bind group (up to
    eight per dispatch); a ninth set of slot buffers replaces the least recently used one."""
    rt = native_rt
    inputs = [f32_buffer(rt, np.full(N, 10.0 * k)) for k in range(9)]
    out, copied = rt.allocate(4 * N), rt.allocate(4 * N)
    program = _program(rt, out, copied)

    def run(k):
        with rt.lock:
            program.record((*nat.buffer_slot(rt, inputs[k]),))
        np.testing.assert_array_equal(rt.download_array(out, np.float32, N), np.full(N, 10.0 * k + 1))

    for k in (0, 1, 0, 1, 0, 1):
        run(k)
    assert program.info()["bind_groups_created"] == 2
    for k in (*range(2, 8), 0, 1, *range(2, 8)):   # eight sets of slots: all held
        run(k)
    assert program.info()["bind_groups_created"] == 8
    run(8)   # replaces the least recently used (inputs[0]'s)
    run(1)
    assert program.info()["bind_groups_created"] == 9
    run(0)
    assert program.info()["bind_groups_created"] == 10


def test_slot_base_offset_is_added(native_rt):
    rt = native_rt
    align = int(rt.info.limits.get("min-storage-buffer-offset-alignment", 256))
    big = f32_buffer(rt, np.arange(align // 4 + N))
    out, copied = rt.allocate(4 * N), rt.allocate(4 * N)
    program = _program(rt, out, copied)
    with rt.lock:
        program.record((nat.buffer_slot(rt, big)[0], align))
    want = np.arange(align // 4, align // 4 + N, dtype=np.float32) + 1
    np.testing.assert_array_equal(rt.download_array(out, np.float32, N), want)


def test_missing_slots_raise_before_recording(native_rt):
    rt = native_rt
    program = _program(rt, rt.allocate(4 * N), rt.allocate(4 * N))
    with rt.lock, pytest.raises(ValueError, match="1 slots"):
        program.record(())
    with rt.lock, pytest.raises(ValueError, match="no buffer"):
        program.record((0, 0))


def test_dawn_validation_error_of_a_fixed_bind_group_raises(native_rt):
    rt = native_rt
    small = rt.allocate(16)
    b = nat.ProgramBuilder(rt)
    # A binding range past the buffer's end: Dawn refuses the bind group when the program is built.
    kernel = rt.kernel(ADD_ONE, label="add-one")
    b.commands.append((0, extension.handle(kernel.pipeline), extension.handle(kernel.layout(0)), 1, 1, 1,
                       ((0, extension.handle(rt.buffer(small).gpu), -1, 0, 1 << 20),
                        (1, extension.handle(rt.buffer(small).gpu), -1, 0, 16))))
    with pytest.raises(ValidationError):
        b.build()


def test_executor_choice_reads_the_environment(monkeypatch):
    for name in ("python", "native", "check"):
        monkeypatch.setenv("TORCH_WEBGPU_EXECUTOR", name)
        assert nat.executor_choice() == name
    monkeypatch.setenv("TORCH_WEBGPU_EXECUTOR", "fast")
    with pytest.raises(ValueError, match="TORCH_WEBGPU_EXECUTOR"):
        nat.executor_choice()


# A dispatch that keeps lavapipe busy for a few milliseconds: long enough that a wait that did not wait
# would leave its writes unfinished.
_SLOW = """
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  var v = x[g.x];
  for (var i = 0u; i < 4000u; i++) { v = v + 1.0; }
  x[g.x] = v;
}
"""


@pytest.fixture(params=["native", "python"])
def submit_path(request, native_rt, monkeypatch):
    """The runtime with its queue submitted and waited for from C++ (the default) or from Python."""
    if request.param == "python":
        monkeypatch.setattr(native_rt.recorder, "native_queue", None)
    return request.param


@pytest.fixture
def native_queue(native_rt):
    """The runtime's C++ submit-and-wait (the default; TORCH_WEBGPU_SUBMIT=python turns it off)."""
    queue = native_rt.recorder.native_queue
    if queue is None:
        pytest.fail(f"the runtime submits from Python (TORCH_WEBGPU_SUBMIT={nq.submit_choice()})")
    return queue


def test_runtime_submits_and_waits_natively(native_queue):
    assert isinstance(native_queue, nq.NativeQueue)


def test_synchronize_waits_for_the_submitted_work(native_rt, submit_path):
    from wgpudawn.backends.dawn._api import process_events

    rt = native_rt
    buf = f32_buffer(rt, np.zeros(64 * 64))
    usage = rt.wgpu.BufferUsage
    staging = rt.device.create_buffer(size=16, usage=usage.MAP_READ | usage.COPY_DST)
    rt.dispatch(rt.kernel(_SLOW, label="slow"), [buf], (64,))
    rt.recorder.encoder().copy_buffer_to_buffer(rt.buffer(buf).gpu, 0, staging, 0, 16)
    submits = rt.submits
    rt.synchronize()
    assert rt.submits == submits + 1
    # The queue is idle: a map of what it wrote completes at the first event processing, with no wait.
    promise = staging.map_async(rt.wgpu.MapMode.READ)
    process_events()
    assert promise._state != "pending"
    promise.sync_wait()
    np.testing.assert_array_equal(np.frombuffer(staging.read_mapped(0, 16), np.float32), [4000] * 4)
    staging.unmap()


def test_download_is_one_native_call_after_the_recorded_work(native_rt, native_queue):
    rt, queue = native_rt, native_queue
    a, out = f32_buffer(rt, np.arange(N)), rt.allocate(4 * N)
    rt.dispatch(rt.kernel(ADD_ONE, label="add-one"), [a, out], (1,))
    waits, submits = queue.waits, rt.submits
    # unaligned ends: the read covers whole words, the bytes asked for come back
    assert rt.download(out, 2, 4 * N - 3) == (np.arange(N, dtype=np.float32) + 1).tobytes()[2:-1]
    assert queue.waits == waits + 1 and rt.submits == submits + 1 and not rt.recorder.has_pending


def test_synchronize_with_nothing_queued_waits_and_submits_nothing(native_rt, native_queue):
    rt, queue = native_rt, native_queue
    rt.synchronize()
    submits, waits = rt.submits, queue.waits
    rt.synchronize()
    rt.synchronize()
    assert rt.submits == submits and queue.waits == waits + 2


def _sync_point(rt, kind, buf):
    """Wait for the queue: `synchronize()`, or a download (a readback waits for everything before it)."""
    if kind == "synchronize":
        rt.synchronize()
    else:
        rt.download(buf)


@pytest.mark.parametrize("sync", ["synchronize", "download"])
def test_invalid_commands_raise_validation_error_and_are_not_submitted(native_rt, submit_path, sync):
    rt = native_rt
    small, other = rt.allocate(16), rt.allocate(16)
    rt.synchronize()
    submits = rt.submits
    # Out of range: Dawn records the error in the encoder and reports it when the encoder is finished.
    rt.recorder.encoder().copy_buffer_to_buffer(rt.buffer(small).gpu, 0, rt.buffer(other).gpu, 0, 1 << 20)
    with pytest.raises(ValidationError, match="does not fit"):
        _sync_point(rt, sync, small)
    assert rt.submits == submits and not rt.recorder.has_pending
    a, out = f32_buffer(rt, np.arange(N)), rt.allocate(4 * N)   # the runtime goes on working
    rt.dispatch(rt.kernel(ADD_ONE, label="add-one"), [a, out], (1,))
    rt.synchronize()
    np.testing.assert_array_equal(rt.download_array(out, np.float32, N), np.arange(N, dtype=np.float32) + 1)


@pytest.mark.parametrize("sync", ["synchronize", "download"])
@pytest.mark.parametrize("pending", [True, False], ids=["work-pending", "nothing-pending"])
def test_lost_device_raises_device_lost_error(native_rt, submit_path, pending, sync):
    from torch_webgpu.runtime import DeviceLostError
    from torch_webgpu.runtime.runtime import Runtime

    rt = Runtime()   # its own device, to destroy (the process-wide runtime's stays)
    if submit_path == "python":
        rt.recorder.native_queue = None
    a, out = f32_buffer(rt, np.arange(N)), rt.allocate(4 * N)
    rt.synchronize()
    if pending:
        rt.dispatch(rt.kernel(ADD_ONE, label="add-one"), [a, out], (1,))
    rt.device.destroy()
    for _ in range(2):   # the second call finds the loss already known
        with pytest.raises(DeviceLostError, match="destroyed"):
            _sync_point(rt, sync, out)


def test_encoder_made_in_cpp_is_wrapped_when_python_records_into_it(native_rt, native_queue, monkeypatch):
    rt, queue = native_rt, native_queue
    monkeypatch.setattr(rt.recorder, "flush_after", None)  # the encoder stays open: no submit for age
    a = f32_buffer(rt, np.arange(N))
    out, copied, again = rt.allocate(4 * N), rt.allocate(4 * N), rt.allocate(4 * N)
    program = _program(rt, out, copied)
    rt.synchronize()
    made = queue.encoders
    with rt.lock:
        program.record((*nat.buffer_slot(rt, a),))   # into a new encoder made in C++, no Python object
    assert queue.encoders == made + 1 and rt.recorder._encoder is None
    rt.copy(out, again)   # Python records into the same encoder, after the program: order is kept
    assert rt.recorder._encoder is not None
    rt.synchronize()
    want = np.arange(N, dtype=np.float32) + 1
    np.testing.assert_array_equal(rt.download_array(again, np.float32, N), want)


def test_cpp_encoder_submitted_by_a_program_run(native_rt):
    rt = native_rt
    a, b = f32_buffer(rt, np.arange(N)), f32_buffer(rt, 2 * np.arange(N))
    out, copied = rt.allocate(4 * N), rt.allocate(4 * N)
    program = _program(rt, out, copied)
    rt.synchronize()
    submits = rt.submits
    with rt.lock:
        program.record((*nat.buffer_slot(rt, a),))
        program.record((*nat.buffer_slot(rt, b),), submit=True)   # finishes the C++-made encoder
    assert rt.submits == submits + 1 and not rt.recorder.has_pending
    want = 2 * np.arange(N, dtype=np.float32) + 1
    np.testing.assert_array_equal(rt.download_array(out, np.float32, N), want)


def test_submit_choice_reads_the_environment(monkeypatch):
    for name in ("python", "native"):
        monkeypatch.setenv("TORCH_WEBGPU_SUBMIT", name)
        assert nq.submit_choice() == name
    monkeypatch.setenv("TORCH_WEBGPU_SUBMIT", "fast")
    with pytest.raises(ValueError, match="TORCH_WEBGPU_SUBMIT"):
        nq.submit_choice()


def test_sync_spin_reads_the_environment(monkeypatch):
    monkeypatch.delenv("TORCH_WEBGPU_SYNC_SPIN_US", raising=False)
    assert nq.sync_spin_microseconds() == 20000
    assert nq.sync_spin_microseconds(software=True) == 0
    monkeypatch.setenv("TORCH_WEBGPU_SYNC_SPIN_US", "250")
    assert nq.sync_spin_microseconds() == 250
    monkeypatch.setenv("TORCH_WEBGPU_SYNC_SPIN_US", "-1")
    with pytest.raises(ValueError, match="TORCH_WEBGPU_SYNC_SPIN_US"):
        nq.sync_spin_microseconds()


@pytest.mark.parametrize("spin_us", [0, 50, 20_000])
def test_a_polling_wait_waits_for_the_submitted_work(native_rt, native_queue, spin_us):
    """Polled for shorter than the work takes (then blocking), or longer: the wait ends once it is done."""
    from wgpudawn.backends.dawn._api import process_events

    rt = native_rt
    buf = f32_buffer(rt, np.zeros(64 * 64))
    usage = rt.wgpu.BufferUsage
    staging = rt.device.create_buffer(size=16, usage=usage.MAP_READ | usage.COPY_DST)
    extension.module.set_spin(spin_us * 1000)
    try:
        rt.dispatch(rt.kernel(_SLOW, label="slow"), [buf], (64,))
        rt.recorder.encoder().copy_buffer_to_buffer(rt.buffer(buf).gpu, 0, staging, 0, 16)
        rt.synchronize()
    finally:
        extension.module.set_spin(int(nq.sync_spin_microseconds() * 1000))
    promise = staging.map_async(rt.wgpu.MapMode.READ)
    process_events()
    assert promise._state != "pending"


def _passes_in_a_fresh_process(script: str) -> None:
    """Run `script` in a new Python (a crash there fails the test instead of ending pytest); it prints ok."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "ok" in proc.stdout, (proc.returncode, proc.stderr[-2000:])


def test_dawn_and_wgpu_native_runtimes_in_one_process_each_submit_their_own_way():
    """A wgpu-native runtime made after a Dawn one (the benchmarks' tiny-dispatch suite) never gets the
    native (Dawn) queue: Dawn's procs on its handles crashed the process."""
    script = ("from torch_webgpu.runtime import Runtime\n"
              "from torch_webgpu.runtime import native as nat\n"
              "from torch_webgpu.runtime.native_queue import native_queue\n"
              "dawn = Runtime(backend='dawn'); dawn.synchronize()\n"
              "other = Runtime(backend='wgpu')\n"
              "queue = native_queue(other.backend, other.device, other.info.software, other.raise_if_lost)\n"
              "assert queue is None and other.recorder.native_queue is None\n"
              "assert not nat.native_available(other)\n"
              "assert 'wgpu' in nat.unavailable_reason(other)\n"
              "buf = other.allocate(16); other.fill(buf, 0); other.synchronize()\n"
              "assert nat.native_available(dawn)\n"
              "print('ok')\n")
    _passes_in_a_fresh_process(script)


def test_buffer_handles_of_two_runtimes_never_collide():
    """Native buffer handles are cached by GPU buffer serial for every runtime of the process: serials
    are unique across pools, so a second runtime's buffers never stand in for the first's (before, both
    pools counted from 1 and eager ops bound the other device's buffers: a crash in a long test run)."""
    script = ("import torch, torch_webgpu\n"
              "from torch_webgpu.runtime import Runtime\n"
              "from torch_webgpu.runtime.extension import buffer_handle\n"
              "other = Runtime(backend='dawn')\n"
              "ids = [other.allocate(4096) for _ in range(64)]\n"
              "serials = {other.pool.get(i).serial for i in ids}\n"
              "for i in ids: buffer_handle(other.pool.get(i))\n"
              "for i in ids: other.free(i)\n"
              "other.empty_cache()\n"
              "x = torch.arange(1000.0)\n"
              "for _ in range(40): y = (x.to('webgpu') + 1) * 2\n"
              "assert torch.equal(y.cpu(), (x + 1) * 2)\n"
              "from torch_webgpu.runtime import get_runtime\n"
              "mine = {b.serial for b in get_runtime().pool.live()}\n"
              "assert not (mine & serials), sorted(mine & serials)[:5]\n"
              "print('ok')\n")
    _passes_in_a_fresh_process(script)
