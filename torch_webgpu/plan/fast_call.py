"""The steady-state call of a static plan on the native executor, without the general path.

A general call (compiled.CompiledPlan.__call__) checks every input, decides per call how each one is
bound (zero-copy, copied, uploaded, int64 narrowed), whether inputs alias, and where outputs go. Once one
call has shown that a plan's inputs are plain contiguous webgpu tensors of the plan's own dtypes and
shapes (or int64 ones its native program narrows to int32 itself, range checked at the next wait), and
that the program needs none of the other per-call decisions (no written inputs, no host readback), the
next calls with the same facts only check them, bind the inputs' buffers, allocate the output tensors
and record the program: a few microseconds of Python instead of tens. Any other call returns None from
`FastCall.__call__` and takes the general path, which stays the reference for what a call means.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from torch_webgpu.runtime import native_eager, tensor_outputs
from torch_webgpu.runtime.extension import buffer_handle

from . import torch_tensors
from .int64 import Int64Narrowing
from .layout import Layout
from .native_executor import NativeLayout
from .outputs import graph_output
from .torch_tensors import torch_dtype

_OFFSET_MASK = 0xFFFFFFFF   # a webgpu data_ptr: buffer id << 32 | byte offset


class Owner(Protocol):
    """What a fast call reads and writes of the CompiledPlan it shortcuts, per call."""

    executor: str   # "native", or "python" when switched to the Python executor (which it leaves alone)
    calls: int


class FastCall:
    """One static layout's native program with its call bound ahead: `fast(args)` runs it and returns
    the graph outputs, or returns None (without touching the device) when `args` need the general path."""

    __slots__ = ("_owner", "_rt", "_program", "_device", "_inputs", "_slots", "_narrowed", "_new_specs",
                 "_new_outputs", "_results", "_output_map", "_made_order", "_align", "_check_overflow")

    def __init__(self, owner: Owner, layout: Layout, native: NativeLayout, device: Any,
                 narrowed: tuple[int, ...], input_specs: Sequence[Any], static: dict[str, tuple[int, int]],
                 output_map: list, align: int, narrowing: Int64Narrowing):
        rt = native.program.rt
        self._owner = owner
        self._rt = rt
        self._program = native.program
        self._device = device
        self._align = align
        n_user = len(input_specs)
        # Per graph input: (shape, torch dtype) it must have to be bound as it is (narrowed: int64).
        self._inputs = tuple((tuple(layout.shapes[k]), torch_dtype("int64" if k in narrowed
                                                                   else spec.device_dtype))
                             for k, spec in enumerate(input_specs))
        # Per input slot: the graph input bound there (an int), or a plan buffer's fixed (handle, offset)
        # (a narrowed input's slot is its int32 buffer; its int64 source is bound after the outputs).
        fixed = {**static, **layout.buffers, **{f"in{k}": layout.host_inputs[f"in{k}"] for k in narrowed}}
        self._narrowed = narrowed
        self._check_overflow = narrowing.check_overflow
        slots: list[Any] = []
        for k in native.input_slots:
            if k < n_user and k not in narrowed:
                slots.append(k)
            else:
                buf_id, base = fixed[f"in{k}"]
                slots.append((buffer_handle(rt.pool.get(buf_id)), base))
        self._slots = tuple(slots)
        # Per output slot: (shape, strides, dtype) of the tensor the extension allocates for it, without a
        # dispatcher round trip (device.register installs the maker).
        self._new_specs = tuple(_new_spec(tuple(int(d) for d in layout.outputs[i].shape),
                                          torch_dtype(layout.outputs[i].dtype))
                                for i in native.output_slots)
        self._new_outputs = tensor_outputs.new_outputs
        # Per plan output: ("input", k) or ("device", j): the j-th tensor made for the output slots.
        order = {i: j for j, i in enumerate(native.output_slots)}
        self._results = tuple(("device", order[i]) if i in order else native.results[i]
                              for i in range(len(layout.outputs)))
        self._output_map = output_map
        # Graph outputs that are all made tensors (no inputs returned, no sizes, no Nones): their order
        made_only = all(type(e) is int and self._results[e][0] == "device" for e in self._output_map)
        self._made_order = tuple(self._results[e][1] for e in self._output_map) if made_only else None

    @staticmethod
    def applies(native: NativeLayout | None, layout: Layout, args: Sequence[Any]) -> bool:
        """Whether a call like this general one (its inputs `args`, its layout's `native` program, None
        for the Python executor) can take the fast call: a program that writes no input and reads
        nothing back, non-empty outputs, webgpu inputs."""
        if native is None or native.writes_inputs or native.reads_back:
            return False
        if any(any(int(d) == 0 for d in layout.outputs[i].shape) for i in native.output_slots):
            return False   # an empty output has no buffer to bind
        device = getattr(args[0], "device", None) if args else None
        return getattr(device, "type", None) == "webgpu"

    @property
    def narrowed(self) -> tuple[int, ...]:
        """The graph inputs given as int64 that the program narrows to int32 itself."""
        return self._narrowed

    def binds(self, args: Sequence[Any]) -> bool:
        """Whether `args` themselves take the fast call (the check every call makes first)."""
        return self._bind(args) is not None

    def _bind(self, args: Sequence[Any]) -> tuple[list[int], list[int]] | None:
        """The (handle, offset) words of the input slots for `args` and of the narrowed inputs' int64
        sources (bound after the outputs), or None if they need the general path."""
        if len(args) != len(self._inputs):
            return None
        device, align, live = self._device, self._align, self._rt.pool.live_by_id
        bound: list[tuple[int, int]] = []   # per argument: (handle, byte offset)
        for t, (shape, dtype) in zip(args, self._inputs, strict=True):
            # dtype identity rules out numpy arrays and DeviceArrays (their dtypes are not torch's)
            if getattr(t, "dtype", None) is not dtype or t.shape != shape or t.device != device:
                return None
            if not t.is_contiguous():
                return None
            ptr = t.data_ptr()
            offset = ptr & _OFFSET_MASK
            buf = live.get(ptr >> 32)
            if buf is None or offset % align:
                return None   # no buffer (an empty tensor) or a misaligned view
            bound.append((buffer_handle(buf), offset))
        words: list[int] = []
        for slot in self._slots:
            words += bound[slot] if type(slot) is int else slot
        sources: list[int] = []
        for k in self._narrowed:
            sources += bound[k]
        return words, sources

    def __call__(self, args: Sequence[Any]) -> list[Any] | None:
        """Run the plan on `args` and return the graph outputs, or None where the general path must."""
        owner = self._owner
        rt = self._rt
        if owner.executor != "native" or rt.profiler is not None or rt.capture is not None:
            return None
        with rt.lock:
            bound = self._bind(args)
            if bound is None:
                return None
            words, sources = bound
            made: list[Any] = []
            if self._new_outputs is not None:
                ids: list[int] = []
                self._new_outputs(self._new_specs, made, ids, native_eager.may_recycle(rt))
            else:
                for shape, _, dtype in self._new_specs:
                    made.append(torch_tensors.empty(shape, dtype, self._device))
                ids = [out.data_ptr() >> 32 for out in made]
            live = rt.pool.live_by_id
            for buf_id in ids:
                words += (buffer_handle(live[buf_id]), 0)
            words += sources
            # Nothing to read back: C++ also submits, with whatever was recorded before.
            self._program.record(tuple(words), submit=True)
            if self._narrowed:
                rt.after_wait(self._check_overflow)
        owner.calls += 1
        if self._made_order is not None:   # every graph output one of the tensors made here
            return [made[j] for j in self._made_order]
        outputs = [made[where] if kind == "device" else args[where] for kind, where in self._results]
        return [graph_output(entry, outputs, args) for entry in self._output_map]


def _new_spec(shape: tuple[int, ...], dtype: Any) -> tuple[tuple[int, ...], tuple[int, ...], Any]:
    """(shape, contiguous strides, dtype): what the extension's output maker takes per tensor."""
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= max(d, 1)
    return shape, tuple(reversed(strides)), dtype

