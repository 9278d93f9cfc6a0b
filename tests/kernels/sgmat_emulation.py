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
# (packed tiles, ".p16": offset and stride in 16-byte words, else in halves)
_LOAD = re.compile(r"subgroupMatrixLoad<subgroup_matrix_(left|right)<f16, 16, 16>, "
                   r"(row_major|col_major)>\(&(As|Bs)\[([^\]]+)\], (\d+)u, (\d+)u\)")
# a result matrix into the results scratch
_SCRATCH_STORE = re.compile(r"subgroupMatrixStore<(row_major|col_major)>\((&Cs\[\w+\]), "
                            r"(\w+), (\w+), (\w+)\);")
_SCRATCH = re.compile(r"var<workgroup> Cs: (array<array<f32, 256>, \d+>);\n")
# packed tiles pass their results through a K-tile array (sgmat_wgsl.SgmatTile.scratch_home)
_HOME_STORE = re.compile(r"subgroupMatrixStore<row_major>\(&(As|Bs)\[(\w+)\], (\w+), (\w+), 4u\);")


def _common(sg_size: int, fours: bool, packed: bool) -> str:
    """The multiply and the store of the emulated matrices: a result matrix holds only the 256 / sg_size
    elements its lane reads back from the scratch (row-major e = lane + q * sg_size, or with `fours`, the
    ".o4" epilogue's groups of 4 adjacent ones from 4 * (lane + (q / 4) * sg_size)), as the real ones
    spread theirs over the lanes."""
    per = 256 // sg_size

    def half(tile: str) -> str:   # f16 element e of a K-tile sub-array
        if packed:
            return f"f32(bitcast<vec2<f16>>({tile}[sub][e / 8u][(e % 8u) / 2u])[e % 2u])"
        return f"f32({tile}[sub][e])"
    elem = (f"(lane + (q / 4u) * {sg_size}u) * 4u + q % 4u" if fours else f"lane + q * {sg_size}u")
    return f"""
struct SgmMatrix {{ sub: u32, off: u32, col_major: bool, stride: u32 }}

fn sgm_elem(lane: u32, q: u32) -> u32 {{
  return {elem};
}}

fn sgm_at(m: SgmMatrix, r: u32, c: u32) -> u32 {{
  return m.off + select(r * m.stride + c, c * m.stride + r, m.col_major);
}}

fn sgm_a(sub: u32, e: u32) -> f32 {{
  return {half("As")};
}}

fn sgm_b(sub: u32, e: u32) -> f32 {{
  return {half("Bs")};
}}

fn sgm_mma(a: SgmMatrix, b: SgmMatrix, c: ptr<function, array<f32, {per}>>, lane: u32) {{
  // trip counts the compiler cannot know: llvmpipe unrolls constant ones at every call site (minutes)
  let n = select({per}u, 0u, P.mnkb.z == 0xFFFFFFFFu);
  let depth = select(16u, 0u, P.mnkb.z == 0xFFFFFFFFu);
  for (var q = 0u; q < n; q++) {{
    let e = sgm_elem(lane, q);
    var s = (*c)[q];
    for (var k = 0u; k < depth; k++) {{
      s = fma(sgm_a(a.sub, sgm_at(a, e / 16u, k)), sgm_b(b.sub, sgm_at(b, k, e % 16u)), s);
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
    packed = "var<workgroup> As: array<array<vec4<u32>," in src
    scratch = _SCRATCH.search(src)
    if scratch:
        src = src.replace(scratch.group(0), "")
        head = src.index("{\n", src.index("fn main(")) + 2
        src = src[:head] + f"  var Cs: {scratch.group(1)};\n" + src[head:]
    if _HOME_STORE.search(src):   # packed tiles: (some) results through the K tiles
        src = _results_through_tiles(src, 256 // sg_size)
    assert scratch or "sgm_store_home" in src, "no results scratch Cs and no results through the K tiles"
    fns = _common(sg_size, "finish4(" in src, packed)
    src = src.replace("subgroup_matrix_result<f32, 16, 16>()", f"array<f32, {256 // sg_size}>()")
    for role, tile in (("left", "As"), ("right", "Bs")):
        loads = [(m.group(1), m.group(3)) for m in _LOAD.finditer(src)]
        assert all(t == tile for r, t in loads if r == role), f"{role} matrices not loaded from {tile}"
    unit = 8 if packed else 1
    src = _LOAD.sub(lambda m: f"SgmMatrix({m.group(4)}, {unit * int(m.group(5))}u, "
                              f"{str(m.group(2) == 'col_major').lower()}, {unit * int(m.group(6))}u)", src)
    src = re.sub(r"(\w+) = subgroupMatrixMultiplyAccumulate\((\w+), (\w+), \1\);",
                 r"sgm_mma(\2, \3, &\1, lane);", src)
    src = _SCRATCH_STORE.sub(lambda m: f"sgm_store({m.group(2)}, {m.group(3)}, {m.group(4)}, "
                                       f"{str(m.group(1) == 'col_major').lower()}, {m.group(5)}, lane);", src)
    src = _HOME_STORE.sub(r"sgm_store_home(\2, \3, \4, lane);", src)
    assert "subgroupMatrix" not in src and "subgroup_matrix" not in src, "a subgroup-matrix builtin is left"
    entry = src.index("var<workgroup>")
    return src[:entry] + fns + src[entry:]


def _results_through_tiles(src: str, per: int) -> str:
    """A packed kernel's results scratch in its K tiles (scratch4 / scratch1 read it back, a row-major
    f32 16x16 matrix of 64 words at word `soff` of sub-array `ssub`) as a private array of the same
    shape: each lane reads back only what its own emulated matrices hold."""
    tile = _HOME_STORE.search(src).group(1)
    subs_words = re.search(rf"var<workgroup> {tile}: array<array<vec4<u32>, (\d+)>, (\d+)>;", src)
    words, subs = int(subs_words.group(1)), int(subs_words.group(2))
    src = src.replace(f"return bitcast<vec4<f32>>({tile}[sub][at]);",
                      f"let i = (sub * {words}u + at) * 4u;\n"
                      "  return vec4<f32>(Ch[i], Ch[i + 1u], Ch[i + 2u], Ch[i + 3u]);")
    src = src.replace(f"return bitcast<f32>({tile}[sub][at + x / 4u][x % 4u]);",
                      f"return Ch[(sub * {words}u + at) * 4u + x];")
    assert f"{tile}[sub]" not in src, "a results read through the K tiles is left"
    home = f"""var<private> Ch: array<f32, {subs * words * 4}>;

fn sgm_store_home(sub: u32, at: u32, m: array<f32, {per}>, lane: u32) {{
  for (var q = 0u; q < {per}u; q++) {{
    Ch[(sub * {words}u + at) * 4u + sgm_elem(lane, q)] = m[q];
  }}
}}
"""
    entry = src.index("var<workgroup>")
    return src[:entry] + home + src[entry:]
