"""WGSL kernels the runtime itself needs (what WebGPU's command encoder lacks)."""

# Fill a u32 word range with one 32-bit pattern (clear_buffer only writes zeros).
FILL_U32 = """
struct Params { offset_words: u32, count_words: u32, value: u32, row_words: u32 }
@group(0) @binding(0) var<storage, read_write> dst: array<u32>;
@group(0) @binding(1) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x + gid.y * p.row_words;
  if (i < p.count_words) {
    dst[p.offset_words + i] = p.value;
  }
}
"""
FILL_WORKGROUP = 256
