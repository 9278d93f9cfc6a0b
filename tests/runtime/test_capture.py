"""Command capture (runtime/capture.py): what the runtime records is captured, pinned and replayed."""

import threading

import numpy as np
import pytest

from torch_webgpu.runtime import BufferSlice, GraphCaptureError
from torch_webgpu.runtime import native as nat
from torch_webgpu.runtime.capture import CommandCapture, recording, unrecorded, unreplayable

from .add_one import ADD_ONE, N, f32_buffer, read_f32


def _capture_add_copy_fill(rt, src, out, copied):
    """Captures out = src + 1; copied = out; copied[-1] = 0; copied[0] = 0 (a fill dispatch of 0.0)."""
    kernel = rt.kernel(ADD_ONE, label="add-one")
    capture = CommandCapture(rt)
    capture.start()
    rt.dispatch(kernel, [src, out], (1,))
    rt.copy(out, copied, 4 * N)
    rt.fill(copied, 0, 4 * (N - 1), 4)
    rt.fill(copied, 0x3F800000, 0, 4)   # 1.0f: a non-zero pattern is a fill dispatch
    return capture.stop()


@pytest.mark.parametrize("executor", ["native", "python"])
def test_replay_reruns_dispatches_copies_and_fills_on_new_data(rt, monkeypatch, executor):
    monkeypatch.setenv("TORCH_WEBGPU_EXECUTOR", executor)
    if executor == "native" and not nat.native_available(rt):
        pytest.fail(f"native executor unavailable: {nat.unavailable_reason()}")
    src = f32_buffer(rt, np.arange(N))
    out, copied = rt.allocate(4 * N), rt.allocate(4 * N)
    captured = _capture_add_copy_fill(rt, src, out, copied)
    assert captured.native == (executor == "native") and captured.dispatches == 2
    rt.upload(src, -np.arange(N, dtype=np.float32))
    rt.fill(copied, 0x40000000)   # 2.0 everywhere: the replay must overwrite it
    dispatches = rt.dispatches
    captured.replay()
    assert rt.dispatches == dispatches + 2
    want = 1 - np.arange(N, dtype=np.float32)
    np.testing.assert_array_equal(read_f32(rt, out), want)
    np.testing.assert_array_equal(read_f32(rt, copied), np.r_[1.0, want[1:-1], 0.0])
    captured.release()
    for b in (src, out, copied):
        rt.free(b)


def test_captured_buffers_stay_out_of_reuse_until_released(rt):
    src = f32_buffer(rt, np.arange(N))
    out, copied = rt.allocate(4 * N), rt.allocate(4 * N)
    serials = {rt.buffer(b).serial for b in (src, out, copied)}
    held_before = rt.memory_stats()["graph_held"]   # other tests' graphs may still be alive
    captured = _capture_add_copy_fill(rt, src, out, copied)
    for b in (out, copied):
        rt.free(b)
    fresh = [rt.allocate(4 * N) for _ in range(8)]
    assert not serials & {rt.buffer(b).serial for b in fresh}
    assert rt.memory_stats()["graph_held"] >= held_before + 2 * 4 * N
    captured.replay()   # writes only its own (freed, held) buffers
    captured.release()
    assert rt.memory_stats()["graph_held"] == held_before
    again = [rt.allocate(4 * N) for _ in range(4)]
    assert serials & {rt.buffer(b).serial for b in again}   # back in the pool after release
    for b in (src, *fresh, *again):
        rt.free(b)


@pytest.mark.parametrize("request_", ["upload", "download", "synchronize"])
def test_capture_refuses_host_transfers_and_waits(rt, request_):
    buf = f32_buffer(rt, np.zeros(N))
    capture = CommandCapture(rt)
    capture.start()
    with pytest.raises(GraphCaptureError, match="a replay would not repeat it"):
        {"upload": lambda: rt.upload(buf, np.ones(N, np.float32)),
         "download": lambda: rt.download(buf),
         "synchronize": rt.synchronize}[request_]()
    with pytest.raises(GraphCaptureError, match="refused earlier"):
        capture.stop()
    assert rt.capture is None
    rt.synchronize()
    rt.free(buf)


def test_commands_recorded_past_the_hooks_fail_the_capture(rt):
    buf = rt.allocate(4 * N)
    capture = CommandCapture(rt)
    capture.start()
    with rt.lock:
        rt.recorder.encoder().clear_buffer(rt.buffer(buf).gpu, 0, 4 * N)   # not through rt.fill
    with pytest.raises(GraphCaptureError, match="bypassed the runtime's capture hooks"):
        capture.stop()
    rt.free(buf)


def test_native_programs_recorded_during_capture_replay_with_their_slots(rt):
    if not nat.native_available(rt):
        pytest.fail(f"native executor unavailable: {nat.unavailable_reason()}")
    src, out = f32_buffer(rt, np.arange(N)), rt.allocate(4 * N)
    after = rt.allocate(4 * N)
    b = nat.ProgramBuilder(rt)
    b.dispatch(rt.kernel(ADD_ONE, label="add-one"), [nat.Slot(0, 0, 4 * N), BufferSlice(out, 0, 4 * N)], (1,))
    program = b.build()
    capture = CommandCapture(rt)
    capture.start()
    with rt.lock:
        program.record(nat.buffer_slot(rt, src), submit=True)
    rt.dispatch(rt.kernel(ADD_ONE, label="add-one"), [out, after], (1,))   # a primitive after the program
    captured = capture.stop()
    assert captured.dispatches == 2
    rt.upload(src, np.full(N, 10, np.float32))
    captured.replay()
    np.testing.assert_array_equal(read_f32(rt, after), np.full(N, 12, np.float32))
    captured.release()
    for buf in (src, out, after):
        rt.free(buf)


def test_launch_recordings_note_each_dispatch_of_their_thread_with_what_it_bound(rt):
    src = f32_buffer(rt, np.arange(N))
    out = rt.allocate(4 * N)
    add_one = rt.kernel(ADD_ONE, label="add_one")
    window = BufferSlice(out, 0, 4 * N)
    with recording() as outer:
        rt.dispatch(add_one, [src, window], (1,))
        with recording() as inner:
            rt.dispatch(add_one, [src, out], (1, 1), label="second")
            rt.dispatch(add_one, [src, out], (0,))   # records nothing: noted nowhere
        others: list = []
        thread = threading.Thread(target=lambda: others.append(rt.dispatch(add_one, [src, out], (1,))))
        thread.start()
        thread.join()
        with unrecorded():   # autotune's timing runs
            rt.dispatch(add_one, [src, out], (1,))
    assert list(inner) == [(add_one, (src, out), (1, 1), "second")]
    assert list(outer) == [(add_one, (src, window), (1,), None), inner[0]]
    assert outer.ranges == [((0, 4 * N), (0, 4 * N))] * 2 and inner.ranges == outer.ranges[1:]
    assert outer.sizes == {src: 4 * N, out: 4 * N}
    np.testing.assert_array_equal(read_f32(rt, out), np.arange(N) + 1)
    rt.free(src)
    rt.free(out)


def test_fills_and_unreplayable_work_mark_every_open_launch_recording(rt):
    buf = rt.allocate(4 * N)
    with recording() as outer, recording() as inner:
        unreplayable()
        rt.fill(buf, 0x3F800000)   # a fill dispatch: noted, and marked as no launch plan's work
    assert inner[:2] == [None, None] and inner[2][0].label == "torch-webgpu-fill" and len(inner) == 3
    assert outer == inner
    with recording() as after:
        pass
    assert list(after) == []
    rt.free(buf)
