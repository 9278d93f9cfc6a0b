"""Native command programs (runtime/native.py + csrc/native_plan): recorded from C++ into the runtime's
encoder, on the runtime's own buffers, with per-call slots and bind groups remade only when a slot changes."""

import numpy as np
import pytest

from torch_webgpu.runtime import BufferSlice, ValidationError
from torch_webgpu.runtime import native as nat

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
    b.commands.append((0, nat.handle(kernel.pipeline), nat.handle(kernel.layout(0)), 1, 1, 1,
                       ((0, nat.handle(rt.buffer(small).gpu), -1, 0, 1 << 20),
                        (1, nat.handle(rt.buffer(small).gpu), -1, 0, 16))))
    with pytest.raises(ValidationError):
        b.build()


def test_executor_choice_reads_the_environment(monkeypatch):
    for name in ("python", "native", "check"):
        monkeypatch.setenv("TORCH_WEBGPU_EXECUTOR", name)
        assert nat.executor_choice() == name
    monkeypatch.setenv("TORCH_WEBGPU_EXECUTOR", "fast")
    with pytest.raises(ValueError, match="TORCH_WEBGPU_EXECUTOR"):
        nat.executor_choice()
