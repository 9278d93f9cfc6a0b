"""A call's inputs checked against the plan and bound to its input buffers: webgpu tensors zero-copy where
the device can bind them, copied on the device where it cannot, int64 ones narrowed on the device, numpy
arrays and CPU tensors uploaded, DeviceArrays bound where they are."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .device_array import DeviceArray
from .dtypes import INT32_MAX, INT32_MIN, NUMPY_DTYPES, SCALAR, dtype_facts, shape_nbytes
from .format import TensorSpec
from .int64 import Int64Narrowing
from .layout import Layout

_INPUT_NAMES = tuple(f"in{k}" for k in range(64))   # the plan's names of its inputs' buffers


def is_webgpu(t: Any) -> bool:
    """True for a tensor on a device other than the CPU (the webgpu device: its data_ptr is a buffer id
    and offset)."""
    return hasattr(t, "device") and not isinstance(t, np.ndarray) and t.device.type not in ("cpu", "meta")


class InputBinder:
    """Checks a call's inputs against the plan's input specs and binds them (`bind`)."""

    def __init__(self, specs: Sequence[TensorSpec], static: dict[str, tuple[int, int]], rt: Any,
                 narrowing: Int64Narrowing, alignment: int):
        self.specs = list(specs)
        self.static = static        # the plan's buffers of static size, by name: (buffer id, offset)
        self.rt = rt
        self.narrowing = narrowing
        self.alignment = alignment  # the device's storage binding offset alignment
        # Per input: its shape as a tuple when fully static (a call's shape is compared with it at once).
        self.static_shapes = [tuple(spec.shape) if all(type(d) is int for d in spec.shape) else None
                              for spec in self.specs]

    def shapes(self, args: Sequence[Any]) -> list[tuple[int, ...]]:
        """The input shapes of a call (a host scalar's value as its "dimension 0"), checked against the
        plan's (None: a dynamic dimension)."""
        if len(args) != len(self.specs):
            raise TypeError(f"compiled graph takes {len(self.specs)} inputs, got {len(args)}")
        shapes = []
        for k, (t, spec) in enumerate(zip(args, self.specs, strict=False)):
            if spec.device_dtype == SCALAR:
                shapes.append((int(t),))   # a host scalar: its value is "dimension 0"
                continue
            shape = tuple(t.shape)
            if shape == self.static_shapes[k]:   # static and matching: no per-dimension checks
                shapes.append(shape)
                continue
            shape = tuple(int(d) for d in shape)
            if len(shape) != len(spec.shape) or any(
                    s is not None and s != d for s, d in zip(spec.shape, shape, strict=False)):
                raise ValueError(f"input {k}: shape {list(shape)} differs from the compiled {spec.shape} "
                                 "(None: dynamic; recompile, or use dynamic=False shapes that match)")
            shapes.append(shape)
        return shapes

    def bind(self, args: Sequence[Any], layout: Layout, keep_alive: list[Any],
             narrowed: list[tuple] | None = None) -> dict[str, tuple[int, int]]:
        """Each plan buffer's (buffer id, byte offset), the inputs' among them: bound zero-copy, copied on
        the device, or uploaded.

        An int64 webgpu input is narrowed to int32 on the device; given `narrowed`, the narrowing of
        those at a bindable offset is left to the caller (the executor records it): (input, buffer id,
        offset, count) are appended there.

        Device temporaries made here (`.contiguous()` of a view) are appended to `keep_alive`: the
        caller holds them until every node of the call is recorded, since only their buffer id is bound
        and a dropped tensor's id is freed (and its memory reused) at the next allocation.
        """
        buffers = {**self.static, **layout.buffers}
        materialised: dict[int, Any] = {}   # id(view) -> its contiguous copy (one per tensor passed twice)
        align = self.alignment
        rt = self.rt
        for k, (t, spec) in enumerate(zip(args, self.specs, strict=False)):
            if spec.device_dtype == SCALAR:
                continue
            name = _INPUT_NAMES[k] if k < len(_INPUT_NAMES) else f"in{k}"
            if isinstance(t, DeviceArray):
                if t.dtype != spec.device_dtype:
                    raise TypeError(f"input {k}: a device array of {t.dtype}, the plan takes "
                                    f"{spec.device_dtype}")
                buffers[name] = (t.buffer, t.offset)   # zero-copy: the array stays where it is
                continue
            webgpu = is_webgpu(t)
            if webgpu and not t.is_contiguous():
                if id(t) not in materialised:
                    materialised[id(t)] = t.contiguous()   # on the device; bound zero-copy below
                    keep_alive.append(materialised[id(t)])
                t = materialised[id(t)]
            is_int64, unchanged = dtype_facts(t.dtype) if webgpu else (False, None)
            if is_int64 and spec.device_dtype == "int32":
                ptr = t.data_ptr()
                if ptr & 7 == 0 and t.numel():
                    if narrowed is not None and (ptr & 0xFFFFFFFF) % align == 0:
                        narrowed.append((k, ptr >> 32, ptr & 0xFFFFFFFF, t.numel()))
                    else:
                        self.narrowing.narrow(ptr >> 32, ptr & 0xFFFFFFFF, layout.host_inputs[name][0],
                                              t.numel())
                    buffers[name] = layout.host_inputs[name]
                    continue
            if unchanged == spec.device_dtype:   # bound as it is (another dtype converts via the host)
                ptr = t.data_ptr()
                buf_id, offset = ptr >> 32, ptr & 0xFFFFFFFF
                if offset % align == 0:
                    buffers[name] = (buf_id, offset)   # zero-copy
                    continue
                size = -(-shape_nbytes(layout.shapes[k], spec.device_dtype) // 4) * 4
                if offset % 4 == 0 and offset + size <= rt.buffer(buf_id).nbytes:
                    # A view at an offset the device cannot bind: one on-device copy.
                    rt.copy(buf_id, layout.host_inputs[name][0], size, offset, 0)
                    buffers[name] = layout.host_inputs[name]
                    continue
                # Sub-word offsets (views of 1-2 byte dtypes): through the host below.
            if isinstance(t, np.ndarray):
                array = np.ascontiguousarray(t)
            else:
                host = t.detach()
                if webgpu:
                    host = host.cpu()
                array = host.contiguous().numpy()
            if array.dtype == np.int64 and array.size and (
                    array.min() < INT32_MIN or array.max() > INT32_MAX):
                raise OverflowError(f"input {k}: int64 values outside int32 range cannot reach WebGPU "
                                    "shaders (they have no 64-bit integers)")
            array = array.astype(NUMPY_DTYPES[spec.device_dtype], copy=False)
            rt.upload(layout.host_inputs[name][0], array)
            buffers[name] = layout.host_inputs[name]
        return buffers
