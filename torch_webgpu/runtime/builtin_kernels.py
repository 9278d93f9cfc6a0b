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

# A fill whose ends are not word-aligned (an f16 scalar): edge words keep their other bytes. Each word
# has one invocation and dispatches are ordered, so the read-modify-write of an edge word is safe.
FILL_BYTES = """
struct Params { first_word: u32, count_words: u32, value: u32, row_words: u32, start: u32, end: u32,
                pad0: u32, pad1: u32 }
@group(0) @binding(0) var<storage, read_write> dst: array<u32>;
@group(0) @binding(1) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x + gid.y * p.row_words;
  if (i >= p.count_words) { return; }
  let w = p.first_word + i;
  var mask = 0u;
  for (var j = 0u; j < 4u; j++) {
    let b = 4u * w + j;
    if (b >= p.start && b < p.end) { mask = mask | (0xffu << (8u * j)); }
  }
  dst[w] = (dst[w] & ~mask) | (p.value & mask);
}
"""
