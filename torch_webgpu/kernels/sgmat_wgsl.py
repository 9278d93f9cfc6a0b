"""WGSL of the tensor-core matmuls (chromium-experimental-subgroup-matrix): the workgroup tile's geometry
(SgmatTile), the staging of f16 K tiles into workgroup memory (element by element or in 16-byte units,
optionally rotated against bank conflicts: store_rotation), and the K loop in its plain, pipelined and
double-buffered forms. The params struct, epilogue and launch order come from matmul_wgsl.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .matmul_wgsl import (
    NUM_WORKGROUPS,
    Epilogue,
    declarations,
    finish_fn,
    header,
    register_pipelined_loop,
    stepped_k_loop,
    tile_at,
    tile_origin,
)

# f16 elements of padding per workgroup-tile row, so the 16 rows one matrix load reads do not start in
# the same banks (H200: benchmarks/results/h200-2026-12-01-sgmat-pad.md)
SGMAT_ROW_PAD = 8
# the largest subgroup whose lanes each take whole groups of 4 of a 16x16 result (".o4": 256 / 64 = 4)
OUT_VEC_MAX_SUBGROUP = 64


@dataclass(frozen=True)
class SgmatTile:
    """The geometry of a tensor-core tile: `sg_m × sg_n` subgroups per workgroup, each owning fm × fn
    16×16 results, bk-deep f16 K tiles whose workgroup rows are padded by `pad` halves."""

    sg_m: int
    sg_n: int
    fm: int
    fn: int
    bk: int
    sg_size: int
    pad: int = SGMAT_ROW_PAD
    b_cols: bool = False   # the B tile stored column by column ([n][k]), read as column-major matrices
    group: int = 0         # launch order of the tiles (tile_origin)
    buffers: int = 1       # K-tile buffers in workgroup memory (2: sgmat_source's `double`)
    results_rounds: int = 1   # the subgroups' results pass through the scratch in this many rounds
    out_vec: bool = False     # results leave 4 adjacent columns a store (matmul_wgsl.finish_fn's finish4)
    packed: bool = False      # K tiles in arrays of 16-byte words (sgmat_source's `packed`)
    pingpong: bool = False    # packed: results alternate between the K tiles and a scratch (_sgmat_stores)

    @property
    def threads(self) -> int:
        """Invocations per workgroup."""
        return self.sg_m * self.sg_n * self.sg_size

    @property
    def bm(self) -> int:
        """Rows of the workgroup's output tile."""
        return self.sg_m * self.fm * 16

    @property
    def bn(self) -> int:
        """Columns of the workgroup's output tile."""
        return self.sg_n * self.fn * 16

    @property
    def workgroup_bytes(self) -> int:
        """Workgroup memory: the padded f16 A and B tiles and one f32 16×16 scratch per subgroup."""
        b_rows, b_row = (self.fn * 16, self.bk) if self.b_cols else (self.bk, self.fn * 16)
        a_tile = self.bm * (self.bk + self.pad)
        b_tile = self.sg_n * b_rows * (b_row + self.pad)
        return 2 * self.buffers * (a_tile + b_tile) + self.results_bytes

    @property
    def results_bytes(self) -> int:
        """Workgroup memory of the results scratch: one f32 16×16 matrix per subgroup of a round (none
        where the results pass through the K tiles: scratch_home)."""
        if self.scratch_home and not self.pingpong:
            return 0
        return 4 * 256 * self.scratch_matrices

    @property
    def a_words(self) -> int:
        """16-byte words of one A sub-array (packed tiles)."""
        return self.fm * 16 * (self.bk + self.pad) // 8

    @property
    def b_words(self) -> int:
        """16-byte words of one B sub-array (packed tiles)."""
        b_rows, b_row = (self.fn * 16, self.bk) if self.b_cols else (self.bk, self.fn * 16)
        return b_rows * (b_row + self.pad) // 8

    @property
    def scratch_home(self) -> tuple[str, int] | None:
        """(array, 16×16 f32 matrices per sub-array) of the K-tile array that packed tiles pass their results
        through once the K loop is done (B's sub-arrays first, then A's); None where they cannot hold one
        matrix per subgroup, or the tiles are not packed."""
        if not self.packed or self.results_rounds != 1:
            return None
        for name, subs, words in (("Bs", self.sg_n * self.buffers, self.b_words),
                                  ("As", self.sg_m * self.buffers, self.a_words)):
            per = words // 64   # an f32 16×16 matrix is 64 words
            if per and subs * per >= self.sg_m * self.sg_n:
                return name, per
        return None

    @property
    def scratch_matrices(self) -> int:
        """16×16 matrices in the results scratch: the subgroups of one round (_sgmat_stores)."""
        return self.sg_m * self.sg_n // self.results_rounds

    @property
    def a_store(self) -> str:
        """The workgroup lvalue of A-tile element (r, c): one sub-array per subgroup row."""
        return self.a_store_in("")

    def a_store_in(self, buffer: str) -> str:
        """a_store in K-tile buffer `buffer` (WGSL; "" the first): buffers are sg_m sub-arrays apart. Packed:
        the 16-byte word of the unit of 8 along K that starts at (r, c)."""
        am = self.fm * 16
        if self.packed:
            words = (self.bk + self.pad) // 8
            return f"As[{buffer_row(buffer, self.sg_m)}r / {am}u][(r % {am}u) * {words}u + c / 8u]"
        return f"As[{buffer_row(buffer, self.sg_m)}r / {am}u][(r % {am}u) * {self.bk + self.pad}u + c]"

    def a_flat(self, r: int, c: int) -> int:
        """The f16 offset of A-tile element (r, c) in As taken as one flat array (a_store's layout)."""
        am, sa = self.fm * 16, self.bk + self.pad
        return (r // am) * am * sa + (r % am) * sa + c

    def b_flat(self, r: int, c: int) -> int:
        """The f16 offset of B-tile element (r, c) in Bs taken as one flat array (b_store's layout)."""
        bw = self.fn * 16
        if self.b_cols:
            return (c // bw) * bw * (self.bk + self.pad) + (c % bw) * (self.bk + self.pad) + r
        return (c // bw) * self.bk * (bw + self.pad) + r * (bw + self.pad) + c % bw

    @property
    def b_store(self) -> str:
        """The workgroup lvalue of B-tile element (r, c): one sub-array per subgroup column."""
        return self.b_store_in("")

    def b_store_in(self, buffer: str) -> str:
        """b_store in K-tile buffer `buffer` (WGSL; "" the first): buffers are sg_n sub-arrays apart."""
        bw, at = self.fn * 16, buffer_row(buffer, self.sg_n)
        if self.packed:   # the 16-byte word of the unit of 8 along K (b_cols) or N that starts at (r, c)
            if self.b_cols:
                return f"Bs[{at}c / {bw}u][(c % {bw}u) * {(self.bk + self.pad) // 8}u + r / 8u]"
            return f"Bs[{at}c / {bw}u][r * {(bw + self.pad) // 8}u + (c % {bw}u) / 8u]"
        if self.b_cols:
            return f"Bs[{at}c / {bw}u][(c % {bw}u) * {self.bk + self.pad}u + r]"
        return f"Bs[{at}c / {bw}u][r * {bw + self.pad}u + c % {bw}u]"


def buffer_row(buffer: str, rows: int) -> str:
    """The WGSL prefix of a sub-array index in K-tile buffer `buffer` of `rows` sub-arrays each."""
    return f"{buffer} * {rows}u + " if buffer else ""


class SgmatParams(Protocol):
    """What sgmat_source reads of its variant's spec (matmul_variants.SgmatSpec)."""

    sg_m: int
    sg_n: int
    fm: int
    fn: int
    bk: int
    pad: int
    group: int
    pipelined: int
    rotate: bool
    double: bool
    order: str
    plain_b: bool
    results_rounds: int
    out_vec: bool
    packed: bool
    pingpong: bool


def sgmat_source(e: Epilogue, spec: SgmatParams, sg_size: int, vec_a: str = "", vec_b: str = "") -> str:
    """Tensor-core matmul (f16 operands, f32 results, 16×16×16 subgroup matrices) of two dense operands:
    see sgmat_main for the tile; `spec`'s fields are below by name.

    `vec_a`/`vec_b`: "cols" or "rows" when that operand's tile is staged 8 f16 at a time along its
    contiguous axis (the operand is then bound as array<vec4<u32>>, one 16-byte load each); "" stages
    element by element. `pipelined` = D > 0 (both operands staged 8 at a time): the loads of the K tile
    D ahead are issued before this tile's multiplies, the next tile stored after them (sgmat_main's
    `next_tiles`). `rotate`: the staging stores rotated per invocation (store_rotation): on the H200
    the unrotated stores of 16-byte units hit 4 invocations per bank (f16 4096^3 w4x2.f4x4.k32.pl: the
    stores alone 367 us of 775, benchmarks/results/h200-2026-12-04-anatomy2.md). `double` (both operands
    staged 8 at a time): two K-tile buffers, the next tile's loads before this tile's multiplies and its
    stores into the other buffer after them, one barrier per K tile (sgmat_main's `double`); with
    `pipelined` = 2 the loads run two tiles ahead (sgmat_main's `ahead`). `order` (instead of `rotate`,
    16-byte staged operands): staging units in unit_origin's `down` or `pairs` order, whose unrotated
    stores (which the driver merges into one 16-byte store per unit) miss each other's banks
    (wide_store_cycles); `down` ran a third slower than the order along the rows on the H100 (matmul.py's
    ".dn" figures: its global loads touch 8 lines a quarter-warp). `plain_b` (with `rotate`): B's stores
    unrotated, whole 16-byte stores along its rows, which miss each other's banks already.
    `results_rounds` > 1: the subgroups pass their results through a scratch that fraction the size
    (_sgmat_stores), so that two 256x128 K-tile buffers fit in 48 KiB. `out_vec` (the output's rows
    contiguous and 4-aligned, a subgroup of at most 64): each lane stores 4 adjacent results at once.
    `packed` (A staged along K, B 8 at a time): the K tiles are arrays of 16-byte words, each staging unit
    one 16-byte store (no rotation), the fragments loaded from them with the word-typed
    `subgroupMatrixLoad<T, Majorness>` (gpuweb#6345), and the results pass through the K tiles once the
    loop is done (SgmatTile.scratch_home) instead of a scratch of their own; with `pingpong` the result
    matrices alternate between the K tiles and a scratch of their own, one barrier each instead of two."""
    sg_m, sg_n, fm, fn, bk, pad, group = spec.sg_m, spec.sg_n, spec.fm, spec.fn, spec.bk, spec.pad, spec.group
    pipelined, rotate, double, order = spec.pipelined, spec.rotate, spec.double, spec.order
    results_rounds, plain_b, out_vec = spec.results_rounds, spec.plain_b, spec.out_vec
    packed, pingpong = spec.packed, spec.pingpong
    assert not (rotate and order), "rotated stores assume units along the contiguous axis"
    # a K-contiguous B (a linear layer's [N, K] weight) is stored by columns: 16-byte runs stay runs
    double = double and bool(vec_a and vec_b)
    out_vec = out_vec and sg_size <= OUT_VEC_MAX_SUBGROUP
    packed = packed and vec_a == "cols" and bool(vec_b)   # every unit runs along its tile's rows in memory
    rotate = rotate and not packed
    g = SgmatTile(sg_m, sg_n, fm, fn, bk, sg_size, pad, b_cols=vec_b == "rows", group=group,
                  buffers=2 if double else 1, results_rounds=results_rounds, out_vec=out_vec, packed=packed,
                  pingpong=pingpong and packed)
    head = header(e, "vec4<u32>" if vec_a else e.dtype, "vec4<u32>" if vec_b else e.dtype,
                  ("chromium_experimental_subgroup_matrix",), out_vec=out_vec) + finish_fn(e, out_vec)

    def operands(k0: str, buffer: str = ""):
        return ((g.bm, bk, "A", "a", "m0", "M", k0, "K", g.a_store_in(buffer), vec_a),
                (bk, g.bn, "B", "b", k0, "K", "n0", "N", g.b_store_in(buffer), vec_b))
    # rotated stores where a unit's 8 halves are adjacent in workgroup memory too (not A transposed)
    rotations = ((store_rotation(g.bm, bk, vec_a, g.threads, g.a_flat) if rotate and vec_a == "cols" else ""),
                 (store_rotation(bk, g.bn, vec_b, g.threads, g.b_flat)
                  if rotate and vec_b and not plain_b else ""))

    def split(k0: str, tag: str = "", declare: bool = True, buffer: str = "") -> tuple[str, str]:
        """(loads, stores) of both tiles at K offset k0 through register set `tag` into `buffer`."""
        staged = zip(operands(k0, buffer), rotations, strict=True)
        (load_a, store_a), (load_b, store_b) = (staging_vec8_split(*o, g.threads, tag, declare, rot, order,
                                                                   packed)
                                                for o, rot in staged)
        return load_a + "\n" + load_b, store_a + "\n" + store_b
    if double:
        loads, stores = split("0u")
        staging = f"  {{\n{loads}\n{stores}\n  }}"
        if pipelined < 2:
            steps = [split("tn", buffer=f"{1 - s}u") for s in (0, 1)]
            return SGMAT_DIAGNOSTICS + head + sgmat_main(g, staging, steps, double=True)
        # two tiles ahead: register set s loads the tile two ahead in step s while set 1 - s (loaded a
        # step before) is stored into the other buffer after the multiplies; set 1 gets tile 1 up front
        staging += "\n" + "\n".join(declarations(split("0u", tag)[0]) for tag in ("s0", "s1"))
        staging += "\n" + split(f"{bk}u", "s1", declare=False)[0]
        steps = [(split("tn", f"s{s}", declare=False)[0],
                  split("tn", f"s{1 - s}", declare=False, buffer=f"{1 - s}u")[1]) for s in (0, 1)]
        main = sgmat_main(g, staging, steps, double=True, ahead=2)
        return SGMAT_DIAGNOSTICS + head + main
    if pipelined and vec_a and vec_b:
        loads, stores = split("0u")
        staging = f"  {{\n{loads}\n{stores}\n  }}"
        if pipelined == 1:
            return SGMAT_DIAGNOSTICS + head + sgmat_main(g, staging, [split("tn")])
        tags = [f"s{d}" for d in range(pipelined)]
        # registers that live across loop steps: declared once, loaded with tiles 1 … depth-1 up front
        for d, tag in enumerate(tags):
            staging += "\n" + declarations(split("0u", tag)[0])
            if d:
                staging += "\n" + split(f"{d * bk}u", tag, declare=False)[0]
        main = sgmat_main(g, staging, [split("tn", tag, declare=False) for tag in tags])
        return SGMAT_DIAGNOSTICS + head + main
    lds = []
    for operand, rot in zip(operands("t"), rotations, strict=True):
        rows, cols, src, lay, r0, rdim, c0, cdim, store, vec = operand
        if vec:
            lds.append(staging_vec8(rows, cols, src, lay, r0, rdim, c0, cdim, store, vec, g.threads, rot,
                                    order, packed))
        else:
            lds.append(staging_scalar(rows, cols, src, lay, r0, rdim, c0, cdim, store, e.dtype, g.threads))
    return SGMAT_DIAGNOSTICS + head + sgmat_main(g, "\n".join(lds))


SGMAT_DIAGNOSTICS = ("diagnostic(off, subgroup_uniformity);\n"
                     "diagnostic(off, chromium.subgroup_matrix_uniformity);\n")


def staging_scalar(rows: int, cols: int, src: str, lay: str, r0: str, rdim: str, c0: str, cdim: str,
                   store: str, dtype: str, threads: int) -> str:
    """WGSL staging of a rows x cols tile element by element (zero outside the matrix) as f16."""
    return f"""  for (var u = 0u; u < {-(-rows * cols // threads)}u; u++) {{
    let e = li + u * {threads}u;
    if (e < {rows * cols}u) {{
      let r = e / {cols}u; let c = e % {cols}u;
      let gr = {r0} + r; let gc = {c0} + c;
      var x = {dtype}(0.0);
      if (gr < {rdim} && gc < {cdim}) {{ x = {dtype}({src}[P.{lay}.x + batch * P.{lay}.y + gr * P.{lay}.z
                                                     + gc * P.{lay}.w]); }}
      {store} = f16(x);
    }}
  }}"""


def sgmat_main(g: SgmatTile, staging: str, next_tiles: list[tuple[str, str]] | None = None,
               double: bool = False, ahead: int = 1) -> str:
    """The workgroup arrays and entry point of a tensor-core matmul; `staging` fills the f16 tiles As and
    Bs (through g.a_store / g.b_store) with the K tile at `t`. With `next_tiles`, one (loads, stores) per
    register set, each loading the K tile at `tn`: `staging` fills the first tile once before the K loop
    (and, for D > 1 sets, loads tiles 1 … D-1 into sets 1 … D-1); step s of the loop loads the tile D
    ahead into set s before its multiplies and stores set s + 1 (the next tile) after them, so D tiles
    of global loads are in flight behind the multiplies (past K the loads give zeros). `double`
    (g.buffers = 2, `next_tiles` = the (loads, stores) of step 0 and step 1): two steps per loop
    iteration, step s multiplying buffer s and storing the next tile into the other one, one barrier
    per K tile (constant buffer offsets: a `cur` index ran at 90-109 TFLOP/s where .pl ran at 156-181);
    `ahead` = 2: each step's loads fetch the tile two ahead (`tn`), so a tile's loads have two steps of
    multiplies to land before their stores (a 16-deep K tile's multiplies are shorter than a load's trip).

    Tint's uniformity analysis wants subgroup-matrix pointers and offsets workgroup-uniform; they only
    need to be uniform per subgroup, which a subgroup index `li / subgroup_size` is, so the
    `chromium.subgroup_matrix_uniformity` diagnostic is off (SGMAT_DIAGNOSTICS). Workgroup memory is one
    sub-array per subgroup row (A), column (B) and subgroup (results), so offsets inside them are loop
    counters and constants.

    Rows are padded by g.pad halves so the 16 rows a matrix load reads do not start in the same banks (a
    row of 32, 64 or 128 halves is a multiple of half the 128-byte bank cycle); on the H200 8 took f16
    4096^3 from 92 to 148 TFLOP/s (16 was slower than none)."""
    fm, fn, bk = g.fm, g.fn, g.bk
    am, bw = fm * 16, fn * 16          # rows of A per subgroup row, columns of B per subgroup column
    sa, sb = bk + g.pad, (bk if g.b_cols else bw) + g.pad   # row strides of the A and B tiles
    multiplies = _sgmat_product(g, "") + "\n    workgroupBarrier();"
    if double:
        assert next_tiles and len(next_tiles) == 2 and g.buffers == 2
        steps = [f"""    {{
    let tn = t + {(s + ahead) * bk}u;
{next_tiles[s][0]}
{_sgmat_product(g, f"{s}u" if s else "")}
{next_tiles[s][1]}
    }}
    workgroupBarrier();""" for s in (0, 1)]
        k_loop = f"""{staging}
  workgroupBarrier();
{stepped_k_loop("0u", bk, steps)}"""
    elif not next_tiles:
        k_loop = f"""  for (var t = 0u; t < K; t += {bk}u) {{
{staging}
    workgroupBarrier();
{multiplies}
  }}"""
    elif len(next_tiles) == 1:
        k_loop = f"""{staging}
  for (var t = 0u; t < K; t += {bk}u) {{
    workgroupBarrier();
    let tn = t + {bk}u;
{next_tiles[0][0]}
{multiplies}
{next_tiles[0][1]}
  }}"""
    else:
        k_loop = f"""{staging}
{register_pipelined_loop("0u", bk, next_tiles, multiplies)}"""
    if g.packed:
        tiles = (f"var<workgroup> As: array<array<vec4<u32>, {g.a_words}>, {g.sg_m * g.buffers}>;\n"
                 f"var<workgroup> Bs: array<array<vec4<u32>, {g.b_words}>, {g.sg_n * g.buffers}>;")
    else:
        tiles = (f"var<workgroup> As: array<array<f16, {am * sa}>, {g.sg_m * g.buffers}>;\n"
                 f"var<workgroup> Bs: array<array<f16, {(bw if g.b_cols else bk) * sb}>, "
                 f"{g.sg_n * g.buffers}>;")
    return f"""
{tiles}
{_sgmat_entry(g)}
{k_loop}
{_sgmat_stores(g)}
}}
"""


def _sgmat_product(g: SgmatTile, buffer: str) -> str:
    """WGSL of one K tile's multiplies: this subgroup's fragments of K-tile buffer `buffer` (WGSL; "" the
    first) into its results c{i}_{j}, one block per 16 deep. The blocks are written out so that every
    matrix load has a constant offset into a fixed-size sub-array: Tint then proves it in bounds and
    robustness does not wrap it in a branch (with a `kk` loop each load was predicated; on the H100 the
    16-subgroup 256x128 tile ran 4% faster with robustness off, h100-2026-12-05-probes3.md)."""
    bw = g.fn * 16
    sa, sb = g.bk + g.pad, (g.bk if g.b_cols else bw) + g.pad   # row strides of the A and B tiles
    a_row, b_row = buffer_row(buffer, g.sg_m), buffer_row(buffer, g.sg_n)
    blocks = []
    for kk in range(0, g.bk, 16):
        mma = []
        for i in range(g.fm):
            mma.append(_fragment_load(g, f"a{i}", "left", f"As[{a_row}sm]", i * 16 * sa + kk, False, sa))
        for j in range(g.fn):
            at = j * 16 * sb + kk if g.b_cols else kk * sb + j * 16
            mma.append(_fragment_load(g, f"b{j}", "right", f"Bs[{b_row}sn]", at, g.b_cols, sb))
        for i in range(g.fm):
            for j in range(g.fn):
                mma.append(f"      c{i}_{j} = subgroupMatrixMultiplyAccumulate(a{i}, b{j}, c{i}_{j});")
        blocks.append("    {\n" + "\n".join(mma) + "\n    }")
    return "\n".join(blocks)


def _fragment_load(g: SgmatTile, name: str, role: str, sub: str, at: int, col_major: bool,
                   stride: int) -> str:
    """WGSL binding `name` to the 16×16 f16 `role` ("left"/"right") matrix at f16 offset `at` of
    workgroup sub-array `sub`, rows (or columns, `col_major`) `stride` halves apart: packed tiles count
    offset and stride in 16-byte words (both multiples of 8 halves)."""
    kind = f"subgroup_matrix_{role}<f16, 16, 16>"
    major = "col_major" if col_major else "row_major"
    if g.packed:
        assert at % 8 == 0 and stride % 8 == 0, (at, stride)
        at, stride = at // 8, stride // 8
    return f"      let {name} = subgroupMatrixLoad<{kind}, {major}>(&{sub}, {at}u, {stride}u);"


def _sgmat_entry(g: SgmatTile) -> str:
    """The results scratch and the entry point's head of a tensor-core matmul: tile origin (m0, n0),
    subgroup `sg` at row `sm`, column `sn` of the workgroup's subgroups, its `lane`, and its zeroed result
    matrices c{i}_{j}."""
    nwg = NUM_WORKGROUPS if g.group else ""
    decl = "\n".join(f"  var c{i}_{j} = subgroup_matrix_result<f32, 16, 16>();"
                     for i in range(g.fm) for j in range(g.fn))
    scratch = f"\n  let cs = sg % {g.scratch_matrices}u;" if g.results_rounds > 1 else ""
    home = g.scratch_home
    module_scope = []
    if home:
        # the results pass through the K tiles (scratch_home): subgroup sg's matrix at word soff of
        # sub-array ssub; scratch4 / scratch1 read back 4 adjacent results / one
        scratch += f"\n  let ssub = sg / {home[1]}u; let soff = (sg % {home[1]}u) * 64u;"
        module_scope.append(f"""fn scratch4(sub: u32, at: u32) -> vec4<f32> {{
  return bitcast<vec4<f32>>({home[0]}[sub][at]);
}}
fn scratch1(sub: u32, at: u32, x: u32) -> f32 {{
  return bitcast<f32>({home[0]}[sub][at + x / 4u][x % 4u]);
}}""")
    if not home or g.pingpong:   # a scratch of their own: all results, or every other one (.pp)
        module_scope.append(f"var<workgroup> Cs: array<array<f32, 256>, {g.scratch_matrices}>;")
    decl_scratch = "\n".join(module_scope)
    return f"""{decl_scratch}
@compute @workgroup_size({g.threads})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32{nwg}) {{
  let M = P.mnkb.x; let N = P.mnkb.y; let K = P.mnkb.z;
  let batch = wid.z;
{tile_origin(g.bm, g.bn, g.group)}
  let sg = li / {g.sg_size}u; let lane = li % {g.sg_size}u;
  let sm = sg / {g.sg_n}u; let sn = sg % {g.sg_n}u;{scratch}
{decl}"""


def _sgmat_stores(g: SgmatTile) -> str:
    """Each result matrix c{i}_{j} through the subgroup's scratch into `finish` (the epilogue);
    with g.results_rounds > 1 the subgroups of round h (sg / scratch_matrices) take their turn between
    barriers that all of them reach; packed tiles pass them through the K tiles (g.scratch_home), with
    g.pingpong every other one through the scratch instead, so that one barrier a matrix suffices."""
    am, bw, per_lane = g.fm * 16, g.fn * 16, 256 // g.sg_size
    cs = "cs" if g.results_rounds > 1 else "sg"
    home = g.scratch_home
    # through the K tiles: every subgroup's last fragment loads must be done before any result lands
    out = ["  workgroupBarrier();"] if home else []
    for i in range(g.fm):
        for j in range(g.fn):
            store = f"subgroupMatrixStore<row_major>(&Cs[{cs}], 0u, c{i}_{j}, 16u);"
            at = f"m0 + sm * {am}u + {i * 16}u + x / 16u, n0 + sn * {bw}u + {j * 16}u + x % 16u"
            # ping-pong: odd matrices through the scratch, even ones through the K tiles; a matrix's slot
            # is written again two matrices later, after a barrier that follows every read of it
            if home and not (g.pingpong and (i * g.fn + j) % 2):   # through the K tiles
                store = f"subgroupMatrixStore<row_major>(&{home[0]}[ssub], soff, c{i}_{j}, 4u);"
                read4, read1 = "scratch4(ssub, soff + x / 4u)", "scratch1(ssub, soff, x)"
            else:
                read4 = f"vec4<f32>(Cs[{cs}][x], Cs[{cs}][x + 1u], Cs[{cs}][x + 2u], Cs[{cs}][x + 3u])"
                read1 = f"Cs[{cs}][x]"
            if g.out_vec:
                # 4 adjacent results a lane: the scratch reads of a quarter-warp are 128 contiguous bytes
                finish = f"""for (var q = 0u; q < {per_lane // 4}u; q++) {{
    let x = (lane + q * {g.sg_size}u) * 4u;
    finish4(batch, {at}, {read4});
  }}"""
            else:
                finish = f"""for (var q = 0u; q < {per_lane}u; q++) {{
    let x = lane + q * {g.sg_size}u;
    finish(batch, {at}, {read1});
  }}"""
            if g.pingpong and home:
                out.append(f"  {store}\n  workgroupBarrier();\n  {finish}")
                continue
            if g.results_rounds == 1:
                out.append(f"  {store}\n  workgroupBarrier();\n  {finish}\n  workgroupBarrier();")
                continue
            for h in range(g.results_rounds):
                turn = f"if (sg / {g.scratch_matrices}u == {h}u)"
                out.append(f"  {turn} {{ {store} }}\n  workgroupBarrier();\n  {turn} {{\n  {finish}\n  }}\n"
                           "  workgroupBarrier();")
    return "\n".join(out)


def _vec8_unit(rows: int, cols: int, store: str, along: str, w: str,
               rotation: str = "", order: str = "", packed: bool = False) -> tuple[str, str]:
    """(position, stores) of staging unit `e` of a rows x cols f16 tile: WGSL for its first element
    (r, c), and the 8 stores of the loaded vec4<u32> `w` into the tile's lvalue `store`. `rotation` (a
    WGSL u32 in 0…3 per invocation, store_rotation): the invocation's q-th pair of stores writes word
    (q + rotation) % 4 of its unit, so that one store instruction's invocations spread over the banks
    (the words are picked by selects, not by indexing `w`: a dynamically indexed vector goes to memory).
    `order`: units in unit_origin's order of that name. `packed`: `store` is the unit's 16-byte word, one
    store of `w`."""
    word = "((q + rot) % 4u)" if rotation else "q"
    if along == "cols":
        runs = cols // 8
        pos = {"down": f"let r = (e / {8 * runs}u) * 8u + e % 8u; let c = ((e / 8u) % {runs}u) * 8u;",
               "pairs": ("let r = (e / 32u) * 8u + (e % 32u) / 8u + ((e % 8u) / 4u) * 4u; "
                         "let c = (e % 4u) * 8u;"),
               }.get(order if order != "pairs" or runs == 4 else "",
                     f"let r = e / {runs}u; let c = (e % {runs}u) * 8u;")
    else:
        runs = rows // 8
        pos = (f"let r = ((e / 8u) % {runs}u) * 8u; let c = (e / {8 * runs}u) * 8u + e % 8u;"
               if order == "down" else f"let r = (e % {runs}u) * 8u; let c = e / {runs}u;")
    if packed:
        return pos, f"{tile_at(store, 'r', 'c')} = {w};"
    array, base = unit_base(store)
    step = unit_step(store, along)
    half = f"2u * {word}" if step == 1 else f"2u * {word} * {step}u"
    src = w
    head = f"let at = {base};\n        "
    if rotation:
        src = "wr"
        head += (f"let rot = {rotation};\n        let wr = select(select({w}, {w}.yzwx, rot == 1u), "
                 f"select({w}.zwxy, {w}.wxyz, rot == 3u), rot >= 2u);\n        ")
    return pos, f"""{head}for (var q = 0u; q < 4u; q++) {{
        let h = bitcast<vec2<f16>>({src}[q]);
        {array}[at + {half}] = h.x;
        {array}[at + {half} + {step}u] = h.y;
      }}"""


def unit_base(store: str) -> tuple[str, str]:
    """(array, index) of the first element of the staging unit at (r, c) in the tile lvalue `store`: the
    array (`X[sub]` for a tile of sub-arrays: a unit never straddles two, so the sub-array is the unit's
    own) and the element's index in it. The unit's stores index `array` at `index` plus constants (one
    base and offsets, not eight formulas: Tint's range analysis then proves them inside the array, so
    robustness adds no clamps that would keep the driver from merging neighbouring stores)."""
    if "][" in store:
        outer, inner = store.split("][", 1)
        return tile_at(outer, "r", "c") + "]", tile_at(inner[:-1], "r", "c")
    name, index = store.split("[", 1)
    return name, tile_at(index[:-1], "r", "c")


def unit_step(store: str, along: str) -> int:
    """How far apart in its array (unit_base) two neighbouring halves of a staging unit lie: the tile
    lvalue's index is affine in the unit's axis `along` inside a unit (its `%` and `/` by multiples of 8
    do not cut a unit), so the step is the index at (0, 1) or (1, 0) less the index at (0, 0)."""
    index = unit_base(store)[1]
    expr = re.sub(r"\b(\d+)u\b", r"\1", index).replace("/", "//")
    if not re.fullmatch(r"[\d\s()+*/%rc]*", expr):
        raise ValueError(f"staging store index {index!r} is not affine arithmetic in r and c")

    def at(r: int, c: int) -> int:
        return eval(expr, {"__builtins__": {}}, {"r": r, "c": c})   # digits, r, c and arithmetic only

    return at(0, 1) - at(0, 0) if along == "cols" else at(1, 0) - at(0, 0)


BANKS = 32          # 4-byte workgroup-memory banks (NVIDIA, AMD, Intel)
BANK_WARP = 32      # invocations whose stores issue together (an NVIDIA warp)


def unit_origin(e: int, rows: int, cols: int, along: str, order: str = "") -> tuple[int, int]:
    """Element (r, c) that staging unit `e` of a rows x cols tile starts at (_vec8_unit's `pos`): units
    run along the contiguous axis; with order `down` 8 at a time across it (8 consecutive invocations, the
    ones one 16-byte store instruction serves per cycle, write the same run of 8 lines: with a padded
    line stride their stores miss each other's banks, as the matrix loads of 8 lines do); with `pairs`
    (lines of 4 units along the columns, a 32-deep K tile) those 8 invocations take lines j and j + 4 of
    each 8: 4 lines of the padded 80-byte stride apart start 64 bytes apart in the banks, so their
    16-byte stores fill all 32 banks, and their global loads read 2 lines as along the rows."""
    if along == "cols":
        runs = cols // 8
        if order == "down":
            return (e // (8 * runs)) * 8 + e % 8, ((e // 8) % runs) * 8
        if order == "pairs" and runs == 4:
            return (e // 32) * 8 + (e % 32) // 8 + ((e % 8) // 4) * 4, (e % 4) * 8
        return e // runs, (e % runs) * 8
    runs = rows // 8
    if order == "down":
        return ((e // 8) % runs) * 8, (e // (8 * runs)) * 8 + e % 8
    return (e % runs) * 8, e // runs


def staging_words(rows: int, cols: int, along: str, threads: int, flat, order: str = "") -> np.ndarray:
    """[round, invocation]: the first 4-byte word (in the tile's workgroup array, `flat(r, c)` the f16
    offset of element (r, c)) of each staging unit of a rows x cols tile; -1 where a round has none."""
    units = rows * cols // 8
    rounds = -(-units // threads)
    words = np.full((rounds, threads), -1)
    for e in range(units):
        words[e // threads, e % threads] = flat(*unit_origin(e, rows, cols, along, order)) // 2
    return words


WIDE_PHASE = 8      # invocations one 16-byte store instruction serves per cycle (8 x 16 bytes = 32 banks)


def wide_store_cycles(words: np.ndarray) -> int:
    """Bank cycles of a tile's staging stores on a model where each unit's 8 unrotated stores issue as one
    16-byte store: `words` as store_cycles'; each phase of WIDE_PHASE invocations costs the
    most words any bank gets, so a round of a 32-wide warp costs at least 4."""
    rounds, threads = words.shape
    cycles = 0
    for phase in words.reshape(rounds, threads // WIDE_PHASE, WIDE_PHASE):
        for lanes in phase:
            live = lanes[lanes >= 0]
            if live.size:
                banks = (live[:, None] + np.arange(4)[None, :]) % BANKS
                cycles += int(np.bincount(banks.ravel(), minlength=BANKS).max())
    return cycles


def store_cycles(words: np.ndarray, rotation: np.ndarray) -> int:
    """Bank cycles of a tile's staging stores: `words` [round, invocation] is the first 4-byte word of each
    unit (-1: none), `rotation` [invocation] its rotation; each of the 4 store pairs costs, per warp, the
    most distinct words any bank gets."""
    rounds, threads = words.shape
    warp = np.arange(threads) // BANK_WARP
    group = (np.arange(rounds)[:, None] * (warp[-1] + 1) + warp[None, :]) * BANKS
    live = (words >= 0).ravel()
    cycles = 0
    for q in range(4):   # units are disjoint: the invocations of one store write distinct words
        bank = (words + (q + rotation[None, :]) % 4) % BANKS
        counts = np.bincount((group + bank).ravel()[live], minlength=rounds * (warp[-1] + 1) * BANKS)
        cycles += int(counts.reshape(-1, BANKS).max(axis=1).sum())
    return cycles


@functools.cache
def store_rotation(rows: int, cols: int, along: str, threads: int, flat) -> str:
    """The WGSL rotation (0…3, from `li`) of a tile's staging stores with the fewest bank cycles
    (store_cycles) on a model of 32 banks and 32-wide warps, among ((li >> p) * a + (li >> p2) * b) & 3;
    `flat(r, c)` is the f16 offset of element (r, c) in the tile's workgroup array. "" where no rotation
    beats none."""
    words = staging_words(rows, cols, along, threads, flat)
    li = np.arange(threads)
    best, choice = store_cycles(words, np.zeros(threads, dtype=int)), ""
    for p in range(6):
        for a in range(1, 4):
            for p2 in range(p + 1, 7):
                for b in range(4):
                    cycles = store_cycles(words, ((li >> p) * a + (li >> p2) * b) % 4)
                    if cycles < best:
                        best, choice = cycles, _rotation_wgsl(p, a, p2, b)
    return choice


def _rotation_wgsl(p: int, a: int, p2: int, b: int) -> str:
    terms = [f"(li >> {q}u)" if q else "li" for q in (p, p2)]
    terms = [t if k == 1 else f"{t} * {k}u" for t, k in zip(terms, (a, b), strict=True) if k]
    return f"(({' + '.join(terms)}) & 3u)"


def _vec8_load(src: str, lay: str, r0: str, rdim: str, c0: str, cdim: str, w: str,
               inside: str = "") -> tuple[str, str]:
    """(coordinates, load): WGSL for unit (r, c)'s matrix row and column `gr`, `gc`, and loading it into
    `w` where it lies inside the rdim x cdim matrix (and `inside`)."""
    return f"let gr = {r0} + r; let gc = {c0} + c;", f"""if ({inside}gr < {rdim} && gc < {cdim}) {{
        {w} = {src}[(P.{lay}.x + batch * P.{lay}.y + gr * P.{lay}.z + gc * P.{lay}.w) / 8u];
      }}"""


def staging_vec8(rows: int, cols: int, src: str, lay: str, r0: str, rdim: str, c0: str, cdim: str,
                  store: str, along: str, threads: int, rotation: str = "", order: str = "",
                  packed: bool = False) -> str:
    """WGSL staging of a rows x cols f16 tile in 8-element units along its contiguous axis ("cols":
    stride 1 along columns, or "rows"), one 16-byte load each; a unit is wholly inside or outside the
    matrix (the contiguous extent, offset and other strides are multiples of 8), outside ones are 0.
    `order`: units in unit_origin's order of that name."""
    units = rows * cols // 8
    pos, stores = _vec8_unit(rows, cols, store, along, "w", rotation, order, packed)
    coords, load = _vec8_load(src, lay, r0, rdim, c0, cdim, "w")
    return f"""  for (var u = 0u; u < {-(-units // threads)}u; u++) {{
    let e = li + u * {threads}u;
    if (e < {units}u) {{
      {pos}
      {coords}
      var w = vec4<u32>(0u);
      {load}
      {stores}
    }}
  }}"""


def staging_vec8_split(rows: int, cols: int, src: str, lay: str, r0: str, rdim: str, c0: str, cdim: str,
                       store: str, along: str, threads: int, tag: str = "",
                       declare: bool = True, rotation: str = "", order: str = "",
                       packed: bool = False) -> tuple[str, str]:
    """staging_vec8 in two halves, (loads, stores): every 16-byte load of this invocation's units into
    its own register `w<lay><u>` first, then every store. In staging_vec8's loop each unit's stores wait
    for its own load before the next load is issued: on the H200 staging alone took twice as long as the
    whole f16 4096^3 kernel (benchmarks/results/h200-2026-12-04-anatomy.md). `tag` names a second set
    of registers; `declare` False assigns registers declared elsewhere (staging_registers) so that they
    outlive a loop step; `order` as staging_vec8's."""
    units = rows * cols // 8
    loads, stores = [], []
    for u in range(-(-units // threads)):
        w = f"w{lay}{tag}{u}"
        pos, stash = _vec8_unit(rows, cols, store, along, w, rotation, order, packed)
        tail = (u + 1) * threads > units   # the last round of units that do not divide among the invocations
        coords, load = _vec8_load(src, lay, r0, rdim, c0, cdim, w, f"e < {units}u && " if tail else "")
        var = "var " if declare else ""
        loads.append(f"  {var}{w} = vec4<u32>(0u);\n  {{\n    let e = li + {u * threads}u;\n      {pos}\n"
                     f"      {coords}\n      {load}\n  }}")
        body = f"      {pos}\n      {stash}"
        if tail:
            body = f"    if (e < {units}u) {{\n{body}\n    }}"
        stores.append(f"  {{\n    let e = li + {u * threads}u;\n{body}\n  }}")
    return "\n".join(loads), "\n".join(stores)
