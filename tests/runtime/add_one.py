"""The runtime tests' kernel and buffer helpers: dst = src + 1 over N floats."""

import numpy as np

ADD_ONE = """
@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  if (g.x < 64u) { dst[g.x] = src[g.x] + 1.0; }
}
"""
N = 64


def f32_buffer(rt, values):
    """A device buffer holding `values` as float32."""
    values = np.asarray(values, dtype=np.float32)
    buf = rt.allocate(values.nbytes)
    rt.upload(buf, values)
    return buf


def read_f32(rt, buf):
    """The first N floats of `buf`."""
    return rt.download_array(buf, np.float32, N)
