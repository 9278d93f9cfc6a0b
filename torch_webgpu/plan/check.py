"""Check mode (TORCH_WEBGPU_EXECUTOR=check): the first call of every native program is re-run by the Python
executor, the reference, and must give the same bits, outputs and written inputs alike (`CheckedNative`,
a wrapper with the executors' `run`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from . import torch_tensors
from .call import CallState
from .device_array import DeviceArray
from .dtypes import shape_nbytes
from .format import TensorSpec
from .native_executor import STATS, NativeLayout
from .python_executor import PYTHON_EXECUTOR


class NativeMismatchError(AssertionError):
    """The native executor's outputs differ from the Python executor's on the same call."""


def _host_bits(t: Any) -> np.ndarray:
    if isinstance(t, np.ndarray):
        return t
    if isinstance(t, DeviceArray):
        return t.numpy()
    return torch_tensors.host_bits(t)


def assert_same_outputs(native: list[Any], python: list[Any], what: str) -> None:
    """Raise NativeMismatchError unless both executors gave bit-identical outputs (NaNs included): numpy
    arrays, DeviceArrays or torch tensors."""
    if len(native) != len(python):
        raise NativeMismatchError(f"{what}: {len(native)} native outputs, {len(python)} Python ones")
    for i, (a, b) in enumerate(zip(native, python, strict=True)):
        if a is b:
            continue
        x, y = _host_bits(a), _host_bits(b)
        if x.shape != y.shape or x.dtype != y.dtype or x.tobytes() != y.tobytes():
            raise NativeMismatchError(f"{what}: output {i} differs between the native and Python executors "
                                      f"({x.dtype}{list(x.shape)} vs {y.dtype}{list(y.shape)})")


def mark_checked(native: NativeLayout) -> None:
    """Note that `native` matched the Python executor."""
    native.checked = True
    STATS["checked"] += 1


class CheckedNative:
    """A native program's call, checked: run natively, then again by the Python executor from the same
    inputs (a program that writes its inputs gets their bytes back first), and compared bit for bit."""

    def __init__(self, native: NativeLayout, input_specs: Sequence[TensorSpec], what: str):
        self.native = native
        self.input_specs = input_specs
        self.what = what

    def run(self, state: CallState, args: Sequence[Any], as_numpy: bool) -> list[Any]:
        """Record the call natively, check it against the reference, and return the native outputs."""
        native, rt = self.native, state.rt
        # A program that writes its inputs: keep their bytes, so the reference run starts from them.
        before = self._snapshot_inputs(state) if native.writes_inputs else None
        outputs = native.run(state, args, as_numpy)
        written = None
        if before is not None:
            written = self._snapshot_inputs(state)
            self._restore_inputs(state, before)
        again = PYTHON_EXECUTOR.run(state.again(), args, as_numpy)
        assert_same_outputs(outputs, again, self.what)
        for mine, theirs in zip(outputs, again, strict=True):
            if isinstance(theirs, DeviceArray) and theirs is not mine:
                theirs.release()
        if written is not None:
            now = self._snapshot_inputs(state)
            assert_same_outputs([self._read(rt, b) for b, _ in written], [self._read(rt, b) for b, _ in now],
                                f"{self.what} (inputs it writes)")
            for buf, _ in (*before, *written, *now):
                rt.free(buf)
        mark_checked(native)
        return outputs

    def _snapshot_inputs(self, state: CallState) -> list[tuple[int, int]]:
        """(copy's buffer id, size) of the bytes of each input the native program binds."""
        rt, copies = state.rt, []
        for k in self.native.input_slots:
            buf_id, base = state.buffers[f"in{k}"]
            size = -(-shape_nbytes(state.layout.shapes[k], self.input_specs[k].device_dtype) // 4) * 4
            copy = rt.allocate(max(size, 4))
            if size:
                rt.copy(buf_id, copy, size, base, 0)
            copies.append((copy, size))
        return copies

    def _restore_inputs(self, state: CallState, copies: list[tuple[int, int]]) -> None:
        for k, (copy, size) in zip(self.native.input_slots, copies, strict=True):
            buf_id, base = state.buffers[f"in{k}"]
            if size:
                state.rt.copy(copy, buf_id, size, 0, base)

    @staticmethod
    def _read(rt: Any, buffer_id: int) -> np.ndarray:
        return np.frombuffer(rt.download(buffer_id), dtype=np.uint8)
