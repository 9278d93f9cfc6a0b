"""Tensor-core kernels on adapters without subgroup matrices (lavapipe): the subgroup-matrix builtins of a
generated kernel replaced by plain WGSL, so the staging, K loops and epilogue around them run against torch.

A matrix load becomes a reference (sub-array, offset, layout) that the multiply reads workgroup memory
through; each lane keeps only the result elements it reads back from the results scratch `Cs`, which
becomes private (it is only written by matrix stores and read back by the same lane); the subgroup size the
kernel was generated for stays what `li / size` says: no real subgroups are used.
"""

from __future__ import annotations

import re

# a matrix load is kept as a reference (sub-array, offset, layout) that the multiply reads through:
# nothing is stored between a kernel's matrix loads and their multiplies
_LOAD = re.compile(r"subgroupMatrixLoad<subgroup_matrix_(left|right)<f16, 16, 16>>\(&(As|Bs)\[([^\]]+)\], ")
_SCRATCH = re.compile(r"var<workgroup> Cs: (array<array<f32, 256>, \d+>);\n")


def _common(sg_size: int, fours: bool) -> str:
    """The multiply and the store of the emulated matrices: a result matrix holds only the 256 / sg_size
    elements its lane reads back from the scratch (row-major e = lane + q * sg_size, or with `fours`, the
    ".o4" epilogue's groups of 4 adjacent ones from 4 * (lane + (q / 4) * sg_size)), as the real ones
    spread theirs over the lanes."""
    per = 256 // sg_size
    elem = (f"(lane + (q / 4u) * {sg_size}u) * 4u + q % 4u" if fours else f"lane + q * {sg_size}u")
    return f"""
struct SgmMatrix {{ sub: u32, off: u32, col_major: bool, stride: u32 }}

fn sgm_elem(lane: u32, q: u32) -> u32 {{
  return {elem};
}}

fn sgm_at(m: SgmMatrix, r: u32, c: u32) -> u32 {{
  return m.off + select(r * m.stride + c, c * m.stride + r, m.col_major);
}}

fn sgm_mma(a: SgmMatrix, b: SgmMatrix, c: ptr<function, array<f32, {per}>>, lane: u32) {{
  // trip counts the compiler cannot know: llvmpipe unrolls constant ones at every call site (minutes)
  let n = select({per}u, 0u, P.mnkb.z == 0xFFFFFFFFu);
  let depth = select(16u, 0u, P.mnkb.z == 0xFFFFFFFFu);
  for (var q = 0u; q < n; q++) {{
    let e = sgm_elem(lane, q);
    var s = (*c)[q];
    for (var k = 0u; k < depth; k++) {{
      s = fma(f32(As[a.sub][sgm_at(a, e / 16u, k)]), f32(Bs[b.sub][sgm_at(b, k, e % 16u)]), s);
    }}
    (*c)[q] = s;
  }}
}}

fn sgm_store(p: ptr<function, array<f32, 256>>, off: u32, m: array<f32, {per}>, col_major: bool, stride: u32,
             lane: u32) {{
  for (var q = 0u; q < {per}u; q++) {{
    let e = sgm_elem(lane, q);
    if (col_major) {{ (*p)[off + (e % 16u) * stride + e / 16u] = m[q]; }}
    else {{ (*p)[off + (e / 16u) * stride + e % 16u] = m[q]; }}
  }}
}}
"""


def emulate_subgroup_matrices(src: str) -> str:
    """`src` (a sgmat_wgsl kernel) with its subgroup-matrix types and builtins in plain WGSL; its results
    must reach the epilogue through subgroupMatrixStore into `Cs` and each lane's reads of it."""
    sg_size = int(re.search(r"let sg = li / (\d+)u;", src).group(1))
    src = src.replace("enable chromium_experimental_subgroup_matrix;\n", "")
    src = src.replace("diagnostic(off, chromium.subgroup_matrix_uniformity);\n", "")
    src = src.replace("diagnostic(off, subgroup_uniformity);\n", "")
    scratch = _SCRATCH.search(src)
    assert scratch, "no results scratch Cs in the kernel"
    src = src.replace(scratch.group(0), "")
    head = src.index("{\n", src.index("fn main(")) + 2
    src = src[:head] + f"  var Cs: {scratch.group(1)};\n" + src[head:]
    fns = _common(sg_size, "finish4(" in src)
    src = src.replace("subgroup_matrix_result<f32, 16, 16>()", f"array<f32, {256 // sg_size}>()")
    for role, tile in (("left", "As"), ("right", "Bs")):
        assert all(m.group(2) == tile for m in _LOAD.finditer(src) if m.group(1) == role), \
            f"{role} matrices not loaded from {tile}"
    src = _LOAD.sub(lambda m: f"SgmMatrix({m.group(3)}, ", src)
    src = re.sub(r"(\w+) = subgroupMatrixMultiplyAccumulate\((\w+), (\w+), \1\);",
                 r"sgm_mma(\2, \3, &\1, lane);", src)
    src = re.sub(r"subgroupMatrixStore\((&Cs\[\w+\], [^;]*)\);", r"sgm_store(\1, lane);", src)
    assert "subgroupMatrix" not in src and "subgroup_matrix" not in src, "a subgroup-matrix builtin is left"
    entry = src.index("var<workgroup>")
    return src[:entry] + fns + src[entry:]
