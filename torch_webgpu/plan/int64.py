"""int64 values at the plan boundary, converted on the device: WebGPU shaders have no 64-bit integers, so a
plan holds int64 as int32 (dtypes.py). A webgpu int64 input is narrowed by a kernel (no host round trip;
a value outside int32 range sets a flag the runtime reads after its next wait: compiled call's readback,
synchronize, .cpu()), and an int64 output that stays on the device is sign-extended by another."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np

_WORKGROUP = 64
# int64 outputs that stay on the device: IREE computes them as int32, the device stores 8 bytes.
_WIDEN_INT32_WGSL = """
@group(0) @binding(0) var<storage, read> src: array<i32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<uniform> p: vec4<u32>;  // count, src word offset, dst word offset, row length
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = g.x + g.y * p.w;
  if (i >= p.x) { return; }
  let v = src[p.y + i];
  dst[p.z + 2u * i] = bitcast<u32>(v);
  dst[p.z + 2u * i + 1u] = select(0u, 0xFFFFFFFFu, v < 0);
}
"""


# int64 webgpu inputs are narrowed on the device (no host round trip); a value outside int32 range sets
# `flag`, which the runtime reads after its next wait (compiled call's readback, synchronize, .cpu()).
_NARROW_INT64_WGSL = """
@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<storage, read_write> flag: array<u32>;
@group(0) @binding(3) var<uniform> p: vec4<u32>;  // count, src word offset, row length, unused
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = g.x + g.y * p.z;
  if (i >= p.x) { return; }
  let lo = src[p.y + 2u * i];
  let hi = src[p.y + 2u * i + 1u];
  dst[i] = lo;
  if (hi != select(0u, 0xFFFFFFFFu, (lo & 0x80000000u) != 0u)) { flag[0] = 1u; }
}
"""


def _rows_and_width(rt: Any, count: int) -> tuple[int, int]:
    """(workgroup rows, grid x) of a 1-D kernel over `count` values, x capped at the device's limit."""
    rows = -(-count // _WORKGROUP)
    return rows, min(rows, int(rt.info.limits.get("max-compute-workgroups-per-dimension", 65535)))


def widen_int32_launch(rt: Any, src_offset: int, dst_offset: int,
                       count: int) -> tuple[Any, tuple[int, int, int], bytes]:
    """Kernel, grid and uniform bytes that sign-extend `count` int32 at `src_offset` into int64."""
    if src_offset % 4 or dst_offset % 8:
        raise ValueError("int64 output widening needs 4-byte aligned source and 8-byte aligned target")
    rows, grid_x = _rows_and_width(rt, count)
    params = struct.pack("<4I", count, src_offset // 4, dst_offset // 4, grid_x * _WORKGROUP)
    kernel = rt.kernel(_WIDEN_INT32_WGSL, label="torch-webgpu-widen-int32")
    return kernel, (grid_x, -(-rows // grid_x), 1), params


def widen_int32(rt: Any, src: int, src_offset: int, dst: int, dst_offset: int, count: int) -> None:
    """Sign-extend `count` int32 (IREE's demoted int64) into an int64 device tensor, on the GPU."""
    kernel, grid, params = widen_int32_launch(rt, src_offset, dst_offset, count)
    rt.dispatch(kernel, [src, dst, rt.constant(params)], grid)


class Int64Narrowing:
    """One plan's int64 -> int32 input narrowing: its kernel and overflow flag, made on first use (the
    flag's buffer through `allocate`, so it lives as long as the plan)."""

    def __init__(self, rt: Any, allocate: Callable[[int], int]):
        self.rt = rt
        self._allocate = allocate
        self._kernel: Any = None
        self._flag: int | None = None

    def launch(self, src_offset: int, count: int) -> tuple[Any, Any, int, tuple[int, int, int]]:
        """Kernel, uniform, overflow-flag buffer and grid of the narrowing of `count` values at byte
        `src_offset` of their binding."""
        rows, grid_x = _rows_and_width(self.rt, count)
        params = struct.pack("<4I", count, src_offset // 4, grid_x * _WORKGROUP, 0)
        if self._flag is None:
            self._kernel = self.rt.kernel(_NARROW_INT64_WGSL, label="torch-webgpu-narrow-int64")
            self._flag = self._allocate(4)
            self.rt.fill(self._flag, 0)
        grid = (grid_x, -(-rows // grid_x), 1)
        return self._kernel, self.rt.constant(params), self._flag, grid

    def narrow(self, src: int, src_offset: int, dst: int, count: int) -> None:
        """`count` int64 of a device buffer at `src_offset` as int32 in `dst` (range checked at next sync)."""
        kernel, params, flag, grid = self.launch(src_offset, count)
        self.rt.dispatch(kernel, [src, dst, flag, params], grid)
        self.rt.after_wait(self.check_overflow)

    def check_overflow(self) -> None:
        """Raise OverflowError if a narrowed int64 input held a value outside int32 range."""
        flag = self._flag
        if flag is not None and self.rt.download_array(flag, np.uint32, 1)[0]:
            self.rt.fill(flag, 0)
            raise OverflowError("a compiled graph's int64 webgpu input had values outside int32 range, "
                                "which WebGPU shaders cannot hold (they have no 64-bit integers); the "
                                "outputs of that call are wrong")
