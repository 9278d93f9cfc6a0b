"""Native eager launches (runtime/native_eager.py): a launch plan's dispatches recorded from C++ into a
compute pass left open across replays, kept in program order with the Python recorder's commands and safe
when a bound buffer is freed while its dispatch is still queued."""

import numpy as np
import pytest

from torch_webgpu.runtime import BufferSlice, native_eager
from torch_webgpu.runtime import native as nat

from .add_one import ADD_ONE, N, f32_buffer, read_f32


@pytest.fixture(scope="module")
def eager_rt(rt):
    if not nat.native_available(rt):
        pytest.fail(f"native recorder unavailable: {nat.unavailable_reason()}")
    return rt


def _program(rt, workgroups=1):
    kernel = rt.kernel(ADD_ONE, label="test-add-one")   # workgroups past the first do nothing
    return native_eager.EagerProgram(rt, [(kernel, [(0, 0, 4 * N), (1, 0, 4 * N)], (workgroups, 1, 1))])


def test_replays_chain_in_one_open_pass_and_keep_order_with_copies(eager_rt, monkeypatch):
    rt = eager_rt
    monkeypatch.setattr(rt.recorder, "flush_after", None)  # the pass stays open: no submit for age
    prog = _program(rt)
    x = np.arange(N, dtype=np.float32)
    a, b, c, d = f32_buffer(rt, x), rt.allocate(4 * N), rt.allocate(4 * N), rt.allocate(4 * N)
    records = native_eager.STATS["records"]
    prog.record([a, b])        # b = a + 1
    prog.record([b, c])        # c = a + 2, same open pass
    assert rt.recorder.native_pass_open
    rt.copy(c, d)              # ends the eager pass first: the copy sees c written
    prog.record([d, a])        # a = a + 3, a new pass after the copy
    np.testing.assert_array_equal(read_f32(rt, a), x + 3)
    np.testing.assert_array_equal(read_f32(rt, c), x + 2)
    assert not rt.recorder.native_pass_open
    assert native_eager.STATS["records"] == records + 3
    for buf in (a, b, c, d):
        rt.free(buf)


def test_a_heavy_replay_is_submitted_at_once_a_light_one_stays_batched(eager_rt, monkeypatch):
    rt = eager_rt
    monkeypatch.setattr(rt.recorder, "flush_after", None)
    x = np.arange(N, dtype=np.float32)
    a, b = f32_buffer(rt, x), rt.allocate(4 * N)
    light = _program(rt)
    assert not light.heavy
    rt.synchronize()
    submits = rt.submits
    light.record([a, b])
    assert rt.submits == submits and rt.recorder.native_pass_open
    monkeypatch.setattr(native_eager, "HEAVY_BYTES", 8 * N)   # both bindings together: heavy
    assert not _program(rt).heavy   # but one workgroup reads a little of what it binds
    heavy = _program(rt, native_eager.HEAVY_MIN_WORKGROUPS)
    assert heavy.heavy
    heavy.record([b, a])   # a = a + 2: submitted with the light replay before it
    assert rt.submits == submits + 1 and not rt.recorder.native_pass_open
    np.testing.assert_array_equal(read_f32(rt, a), x + 2)
    for buf in (a, b):
        rt.free(buf)


def test_python_dispatch_after_a_native_replay_sees_its_result(eager_rt):
    rt = eager_rt
    prog = _program(rt)
    kernel = rt.kernel(ADD_ONE, label="test-add-one")
    x = np.full(N, 5.0, dtype=np.float32)
    a, b, c = f32_buffer(rt, x), rt.allocate(4 * N), rt.allocate(4 * N)
    prog.record([a, b])
    rt.dispatch(kernel, [b, c], (1, 1, 1))   # the recorder's own pass, after the native one ends
    prog.record([c, a])
    np.testing.assert_array_equal(read_f32(rt, a), x + 3)
    for buf in (a, b, c):
        rt.free(buf)


@pytest.mark.parametrize("submit", [False, True])
def test_a_compiled_program_after_a_replay_ends_the_eager_pass_first(eager_rt, submit):
    rt = eager_rt
    prog = _program(rt)
    x = np.arange(N, dtype=np.float32)
    a, b, c = f32_buffer(rt, x), rt.allocate(4 * N), rt.allocate(4 * N)
    builder = nat.ProgramBuilder(rt)    # what a compiled plan records: c = b + 1, on fixed buffers
    builder.dispatch(rt.kernel(ADD_ONE, label="test-add-one"), [BufferSlice(b, 0, 4 * N),
                                                                BufferSlice(c, 0, 4 * N)], (1,))
    compiled = builder.build()
    prog.record([a, b])                 # b = a + 1, pass left open
    with rt.lock:
        compiled.record((), submit=submit)
    assert not rt.recorder.native_pass_open
    prog.record([c, a])                 # a = a + 3
    np.testing.assert_array_equal(read_f32(rt, a), x + 3)
    for buf in (a, b, c):
        rt.free(buf)


def test_a_buffer_freed_while_its_dispatch_is_queued_keeps_its_contents_for_it(eager_rt):
    rt = eager_rt
    prog = _program(rt)
    x = np.arange(N, dtype=np.float32)
    a, b = f32_buffer(rt, x), rt.allocate(4 * N)
    prog.record([a, b])        # queued, not submitted
    rt.free(a)
    reused = f32_buffer(rt, np.zeros(N, dtype=np.float32))   # the pool may hand a's GPU buffer back
    np.testing.assert_array_equal(read_f32(rt, b), x + 1)
    np.testing.assert_array_equal(read_f32(rt, reused), np.zeros(N, dtype=np.float32))
    rt.free(b)
    rt.free(reused)


def test_empty_cache_between_replays_rebinds_new_buffers(eager_rt):
    rt = eager_rt
    prog = _program(rt)
    x = np.arange(N, dtype=np.float32)
    a, b = f32_buffer(rt, x), rt.allocate(4 * N)
    prog.record([a, b])
    rt.free(b)
    rt.empty_cache()           # waits, then destroys the pooled GPU buffer b used
    b = rt.allocate(4 * N)
    prog.record([a, b])
    np.testing.assert_array_equal(read_f32(rt, b), x + 1)
    rt.free(a)
    rt.free(b)


def test_eager_launch_choice_reads_the_environment(monkeypatch):
    monkeypatch.delenv("TORCH_WEBGPU_EAGER_LAUNCH", raising=False)
    assert native_eager.eager_launch_choice() == "native"
    monkeypatch.setenv("TORCH_WEBGPU_EAGER_LAUNCH", "python")
    assert native_eager.eager_launch_choice() == "python"
    monkeypatch.setenv("TORCH_WEBGPU_EAGER_LAUNCH", "cuda")
    with pytest.raises(ValueError, match="TORCH_WEBGPU_EAGER_LAUNCH"):
        native_eager.eager_launch_choice()


def test_python_launches_nest():
    assert not native_eager.python_forced()
    with native_eager.python_launches():
        with native_eager.python_launches():
            assert native_eager.python_forced()
        assert native_eager.python_forced()
    assert not native_eager.python_forced()
