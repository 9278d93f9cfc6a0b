"""Matmul family: out[b] = epilogue(alpha * A[b] @ B[b]) for batched, strided (transposed) operands.

The problem is declarative (`MatmulProblem`); `variants` lists what can run it on a device (best default
first) and `plan_matmul` returns the `KernelLaunch` of one. Epilogue, in order: `alpha * acc`,
`+ beta * bias` (broadcast by strides), activation, `+ residual`. Variants are parameters of the
templates in matmul_wgsl.py: register-tiled SIMT (tile, outputs per invocation, K depth, vec4 loads),
split-K matrix-vector (subgroup or workgroup reduction), streaming matrix-vector for decode at memory
bandwidth (16-byte loads, several in flight per lane; the default on hardware GPUs), and of
sgmat_wgsl.py: tensor cores (subgroup matrices).
Split-K tiled variants (".s4": `TiledSpec.splits`) are two dispatches, `plan_matmul_steps`: each of
`splits` K slices of a tile writes its f32 partial sums to a scratch buffer ("partials"), then a combine
pass sums them and applies the epilogue; they multiply the workgroups of problems with few output tiles
(ViT's 197-token matmuls) without shrinking the tile.
Storage may be f32 or f16 (shader-f16); accumulation is always f32.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from . import matmul_wgsl as wgsl
from . import sgmat_wgsl
from .launch import PARAMS, DeviceCaps, KernelLaunch, ceil_div, f32_word, grid_within, record
from .matmul_wgsl import ACTIVATIONS

__all__ = ["ACTIVATIONS", "Layout", "MatmulProblem", "plan_matmul", "variants", "MatmulPlan",
           "plan_matmul_steps", "record_matmul", "split_count",
           "VARIANTS", "TiledSpec", "GemvSpec", "SgmatSpec", "Piece", "split_for_binding",
           "tensor_core_subgroup_size", "vec8_axis", "GroupedGemvProblem", "grouped_variants",
           "plan_grouped_matmul", "GROUPED_MAX"]


@dataclass(frozen=True)
class Layout:
    """Where an operand's elements are: offset and (batch, row, col) strides, all in elements."""

    offset: int
    batch_stride: int
    row_stride: int
    col_stride: int

    def words(self) -> list[int]:
        """The four u32 params of this layout."""
        return [self.offset, self.batch_stride, self.row_stride, self.col_stride]

    def t(self) -> Layout:
        """The transposed view (rows and columns swapped)."""
        return Layout(self.offset, self.batch_stride, self.col_stride, self.row_stride)

    def vec4_along(self, axis: str, extent: int) -> bool:
        """Whole vec4s along `axis` ("row" or "col", the one of stride 1 and `extent` elements):
        offset, the other strides and the extent are multiples of 4."""
        unit, other = (self.col_stride, self.row_stride) if axis == "col" else (self.row_stride,
                                                                                 self.col_stride)
        return (unit == 1 and extent % 4 == 0 and self.offset % 4 == 0 and other % 4 == 0
                and self.batch_stride % 4 == 0)


@dataclass(frozen=True)
class MatmulProblem:
    """One batched matmul with its epilogue. `dtype`: storage type of a, b, bias, residual and out."""

    batch: int
    m: int
    n: int
    k: int
    a: Layout
    b: Layout
    out: Layout
    dtype: str = "f32"
    bias: Layout | None = None
    residual: Layout | None = None
    activation: str | None = None
    alpha: float = 1.0
    beta: float = 1.0

    def shape_class(self) -> str:
        """A coarse key for autotuning: shapes in one class share a winner."""
        def bucket(x: int) -> int:
            return 1 << max(0, (x - 1).bit_length())
        return f"b{bucket(self.batch)}m{bucket(self.m)}n{bucket(self.n)}k{bucket(self.k)}"

    def layout_class(self) -> str:
        """Which operand axes are contiguous and vec4-loadable (variants depend on it)."""
        def cls(lay: Layout, rows: int, cols: int) -> str:
            if lay.col_stride == 1:
                return "r4" if lay.vec4_along("col", cols) else "r"
            if lay.row_stride == 1:
                return "c4" if lay.vec4_along("row", rows) else "c"
            return "s"
        return f"a{cls(self.a, self.m, self.k)}b{cls(self.b, self.k, self.n)}"

    @property
    def flops(self) -> int:
        """2·batch·M·N·K."""
        return 2 * self.batch * self.m * self.n * self.k

    def normalized(self) -> MatmulProblem:
        """Strides of size-1 dims set to 0 (they are never stepped), so layout checks see real ones."""
        def norm(lay: Layout | None, rows: int, cols: int) -> Layout | None:
            if lay is None:
                return None
            return Layout(lay.offset, lay.batch_stride if self.batch > 1 else 0,
                          lay.row_stride if rows > 1 else 0, lay.col_stride if cols > 1 else 0)
        return replace(self, a=norm(self.a, self.m, self.k), b=norm(self.b, self.k, self.n),
                       out=norm(self.out, self.m, self.n), bias=norm(self.bias, self.m, self.n),
                       residual=norm(self.residual, self.m, self.n))

    def transposed(self) -> MatmulProblem:
        """The same product as out^T = B^T @ A^T (M and N swapped), for kernels that want small M."""
        return replace(self, m=self.n, n=self.m, a=self.b.t(), b=self.a.t(), out=self.out.t(),
                       bias=self.bias.t() if self.bias else None,
                       residual=self.residual.t() if self.residual else None)


@dataclass(frozen=True)
class TiledSpec:
    """Register-tiled SIMT: a bm × bn tile per workgroup, tm × tn outputs per invocation, bk-deep K tiles."""

    bm: int
    bn: int
    bk: int
    tm: int
    tn: int
    lds4: bool = False   # groups of 4 adjacent outputs per invocation, vec4 reads of the K tiles
    splits: int = 1      # split-K: K slices, each its own workgroup, summed by a combine pass
    double: bool = False  # two K-tile buffers: the next tile's loads overlap this one's FMAs
    group: int = 0       # tiles launched `group` rows at a time down each column (matmul_wgsl.tile_origin)
    pipelined: int = 0   # K tiles fetched into registers ahead, during the FMAs (matmul_wgsl.tiled_source)
    a_rows: bool = False  # a K-contiguous A's tile kept [i][k], both tiles stored in whole vec4s (".ar")
    a_pad: bool = False   # [k][i] A tile of padded lines: its stores off each other's banks (".ap")
    out_vec: bool = False  # each group of 4 adjacent outputs stored at once (".o4", rows 4-aligned only)
    vec_stores: bool = False  # an N-contiguous B's units stored in whole vec4s (".bv")

    @property
    def threads(self) -> int:
        """Invocations per workgroup."""
        return (self.bm // self.tm) * (self.bn // self.tn)

    def workgroup_bytes(self, dtype: str) -> int:
        """Workgroup memory of the K tiles (kept in f32)."""
        a_row = self.bk + (wgsl.ROWS_PAD if self.a_rows else 0)
        a_lines = wgsl.LINE_PAD * self.bk if self.a_pad else 0
        return 4 * (self.bm * a_row + a_lines + self.bn * self.bk) * (2 if self.double else 1)


@dataclass(frozen=True)
class GemvSpec:
    """Few rows: `ln` columns per workgroup, `lk` invocations splitting K; `subgroup` reduces with
    subgroupAdd (k-contiguous B only). `unroll` > 0: the streaming form (gemv_stream_*_source) built
    for memory bandwidth, with `unroll` independent loads in flight per invocation; its ".v4" form loads
    16 bytes at a time (8 halves or 4 floats). k_fast: `lk` lanes per output column walk K (lanes
    combined by subgroup shuffles/adds or a workgroup tree); else each invocation owns 16 bytes of
    consecutive columns, `ln` of them along N and `lk` K slices (workgroup tree)."""

    lk: int
    ln: int
    k_fast: bool
    subgroup: bool = False
    unroll: int = 0

    @property
    def threads(self) -> int:
        """Invocations per workgroup."""
        return self.lk * self.ln

    def workgroup_bytes(self, dtype: str, mr: int = 4, sg: int = 1) -> int:
        """Workgroup memory of the partial sums."""
        if self.unroll and not self.k_fast:
            return 32 * self.threads        # up to two vec4<f32> partials per invocation
        if self.unroll and self.subgroup and self.lk <= sg:
            return 0
        return 4 * mr * self.ln * (self.lk // sg if self.subgroup else self.lk)


@dataclass(frozen=True)
class SgmatSpec:
    """Tensor cores: sg_m × sg_n subgroups, each fm × fn 16×16 result matrices, bk-deep f16 K tiles."""

    sg_m: int
    sg_n: int
    fm: int
    fn: int
    bk: int = 32
    pad: int = sgmat_wgsl.SGMAT_ROW_PAD   # f16 elements of padding per workgroup-tile row (bank conflicts)
    group: int = 0       # tiles launched `group` rows at a time down each column (matmul_wgsl.tile_origin)
    pipelined: int = 0   # K tiles loaded ahead, during the multiplies (sgmat_wgsl.sgmat_main's next_tiles)
    rotate: bool = False   # staging stores rotated per invocation against bank conflicts (".rot")
    double: bool = False   # two K-tile buffers, one barrier per K tile (".db")
    order: str = ""        # staging units "down" 8 lines at a time (".dn") or in "pairs" of lines 4 apart
    #                        (".pr"): unrotated 16-byte stores off each other's banks (sgmat_wgsl.unit_origin)
    plain_b: bool = False  # with `rotate`, B's stores unrotated: whole 16-byte stores along its rows (".bp")
    results_rounds: int = 1   # results through a scratch this fraction the size, in turns (".cs2")
    out_vec: bool = False  # results stored 4 adjacent columns a lane (".o4", rows 4-aligned only)
    packed: bool = False   # K tiles of 16-byte words, one store a unit, results through them (".p16")
    pingpong: bool = False  # packed: results alternate between the K tiles and a scratch (".pp")

    @property
    def tile(self) -> tuple[int, int]:
        """(rows, cols) of the output tile of one workgroup."""
        return self.sg_m * self.fm * 16, self.sg_n * self.fn * 16

    def workgroup_bytes(self, dtype: str, b_cols: bool | None = None) -> int:
        """Workgroup memory: f16 K tiles and one f32 16×16 scratch per subgroup; with B stored by columns
        (`b_cols`: a K-contiguous B) or by rows, or the larger of the two (None)."""
        return max(sgmat_wgsl.SgmatTile(self.sg_m, self.sg_n, self.fm, self.fn, self.bk, 1, self.pad, by_cols,
                                        buffers=2 if self.double else 1, results_rounds=self.results_rounds,
                                        packed=self.packed, pingpong=self.pingpong)
                   .workgroup_bytes for by_cols in ((False, True) if b_cols is None else (b_cols,)))


VARIANTS: dict[str, TiledSpec | GemvSpec | SgmatSpec] = {
    "tile128x128.r8x8.k16": TiledSpec(128, 128, 16, 8, 8),
    # vec4 reads of the K tiles (H200 f32, benchmarks/results/h200-2026-12-01-tiled.md): 4096^3 35.9 TFLOP/s
    # (plain 128x128: 32.4), 128x768x3072 11.3-11.7; at 128x128 the vec4 reads gained nothing
    "tile128x64.r8x4.k16.l4": TiledSpec(128, 64, 16, 8, 4, True),
    "tile64x64.r4x4.k16.l4": TiledSpec(64, 64, 16, 4, 4, True),
    "tile128x128.r8x8.k8": TiledSpec(128, 128, 8, 8, 8),
    "tile64x128.r4x8.k16": TiledSpec(64, 128, 16, 4, 8),
    "tile128x128.r8x8.k32": TiledSpec(128, 128, 32, 8, 8),
    "tile128x64.r8x4.k16": TiledSpec(128, 64, 16, 8, 4),
    "tile64x64.r4x4.k16": TiledSpec(64, 64, 16, 4, 4),
    "tile64x64.r4x4.k32": TiledSpec(64, 64, 32, 4, 4),
    "tile32x64.r2x4.k32": TiledSpec(32, 64, 32, 2, 4),
    "tile16x64.r1x4.k32": TiledSpec(16, 64, 32, 1, 4),
    "tile32x32.r2x2.k16": TiledSpec(32, 32, 16, 2, 2),
    # double-buffered K tiles (".db": one barrier per tile, the next tile's loads in flight during the
    # FMAs). H200 f32 4096^3 with a `cur` buffer index (benchmarks/results/h200-2026-12-02-f32-tiles.md):
    # 128x128.k8.l4.db 35.3 TFLOP/s, 128x64.l4.db 31.0, against 35.9 for 128x64.l4; as two-step loop
    # iterations with constant buffer offsets (h200-2026-12-04-pipelines.md) 128x64.l4.db 38.3-38.4 and
    # 128x128.k8.l4.db 38.3 in three probes (first for large problems; the other shapes, depths and
    # launch orders 27.7-38.3: 128x128.k16, 128x64.k8 and .k32, 64x128, 128x128.k4, .g4/.g8/.g16, gone),
    # 64x64.l4.db 15.2 at 128x768x3072 (first for few rows; 14.7 without).
    # K-tile loops and staging written out with constant offsets gained nothing
    # (benchmarks/results/h200-2026-12-03-unroll.json: 128x64.l4 33.6 unrolled against 35.9, 128x128.k16.l4
    # 35.3; f16 sgmat w2x2.f4x4 147.9 against 149.2): the driver unrolls them itself
    "tile128x128.r8x8.k8.l4.db": TiledSpec(128, 128, 8, 8, 8, True, double=True),
    "tile128x64.r8x4.k16.l4.db": TiledSpec(128, 64, 16, 8, 4, True, double=True),
    "tile64x64.r4x4.k16.l4.db": TiledSpec(64, 64, 16, 4, 4, True, double=True),
    # grouped launch order (".gN": N tile rows down each column before the next). H200 f32 4096^3
    # (benchmarks/results/h200-2026-12-04-probes2.md): 128x64.l4.g8 36.1 TFLOP/s against 35.9, within
    # noise; other tile shapes and depths of the vec4-read tile (k8, k32, 64x128, 128x128.l4, 256x64,
    # 4x8 per invocation) were all slower (27-32)
    "tile128x64.r8x4.k16.l4.g8": TiledSpec(128, 64, 16, 8, 4, True, group=8),
    "tile128x128.r8x8.k16.g8": TiledSpec(128, 128, 16, 8, 8, group=8),
    # the next K tile fetched into registers during the FMAs, one buffer (".pl"). H200 f32 4096^3
    # (benchmarks/results/h200-2026-12-04-pipelines.md): 128x128.k8.l4.pl 37.9 TFLOP/s in three probes
    # (first for large problems), 128x128.k16.l4.pl 37.2, 128x64.l4.pl 34.5 against 35.9 unpipelined
    "tile128x64.r8x4.k16.l4.pl": TiledSpec(128, 64, 16, 8, 4, True, pipelined=True),
    "tile128x128.r8x8.k16.l4.pl": TiledSpec(128, 128, 16, 8, 8, True, pipelined=True),
    "tile128x128.r8x8.k8.l4.pl": TiledSpec(128, 128, 8, 8, 8, True, pipelined=True),
    "tile64x64.r4x4.k16.l4.pl": TiledSpec(64, 64, 16, 4, 4, True, pipelined=True),
    "tile128x64.r8x4.k8.l4.pl": TiledSpec(128, 64, 8, 8, 4, True, pipelined=True),
    "tile128x128.r8x8.k16.pl": TiledSpec(128, 128, 16, 8, 8, pipelined=True),
    # two K tiles in flight (".pl2": two register sets, two steps per loop iteration): H200 f32 4096^3
    # 128x128.k8.l4.pl2 37.2, k16 32.9, 128x64 33.5, grouped 37.1-37.2 (the FMAs bound f32: without
    # staging 41.3)
    "tile128x128.r8x8.k8.l4.pl2": TiledSpec(128, 128, 8, 8, 8, True, pipelined=2),
    # A tiles kept [i][k] as loaded (".ar": whole-vec4 stores, none of the transposing scalar stores of a
    # K-contiguous A). H100 f32 4096^3 (benchmarks/results/h100-2026-12-05-probes.md): 128x128.k8.l4.db.ar
    # 38.0-38.3 against 38.2-38.5 without; 128x128.k16.db 37.6-37.9, 128x64.k16.pl 34.3-34.5, 64x64.k16.db
    # 32.1-32.4, 128x128.k8.pl 30.9-31.1, 128x64.k16.db 30.5-30.7 (eight A vec4s held over four k): gone
    "tile128x128.r8x8.k8.l4.db.ar": TiledSpec(128, 128, 8, 8, 8, True, double=True, a_rows=True),
    # 512-invocation double-buffered tiles (a quarter less staging per FMA than 128x128). H100 f32 4096^3
    # (benchmarks/results/h100-2026-12-05-probes2.md): 256x128.k8.db 37.7, 128x256 37.0, both k16 37.6
    # against 38.5 for 128x128.k8.db: gone but the first
    "tile256x128.r8x8.k8.l4.db": TiledSpec(256, 128, 8, 8, 8, True, double=True),
    # the [k][i] A tile's lines padded (".ap", matmul_wgsl.LINE_PAD): a K-contiguous A's transposing stores
    # on 32 banks at k8 instead of 16. f32 4096^3 (h100-2026-12-05-probes2.md): 128x128.k8.l4.db.ap 39.97
    # TFLOP/s on the H200 (both processes; 40.3 on the H100) against 38.26 unpadded, first for large
    # problems, its grouped form level (39.97; the H200 harness's autotuner took it), pipelined 38.4;
    # 256x128.k8.db.ap 37.3 and the padded k16 tiles 33.5-34.7 (16 banks, yet slower than unpadded): gone.
    # Also gone: 128x128.k16.db.ap with the next tile fetched and stashed 8 lines at a time around as many
    # lines' FMAs (the k8 tiles' registers and store banks, half their barriers), H200 33.5-33.6 TFLOP/s
    # against 40.0 (h200-2026-12-06-issue12-stop33.md; autotuner 4.11 ms against 3.44)
    "tile128x128.r8x8.k8.l4.db.ap": TiledSpec(128, 128, 8, 8, 8, True, double=True, a_pad=True),
    "tile128x128.r8x8.k8.l4.db.g8.ap": TiledSpec(128, 128, 8, 8, 8, True, double=True, group=8, a_pad=True),
    "tile128x128.r8x8.k8.l4.pl.ap": TiledSpec(128, 128, 8, 8, 8, True, pipelined=True, a_pad=True),
    # 128-invocation 128x128 tiles, 8x16 (or 16x8) outputs an invocation: six vec4 workgroup reads per
    # 128 FMAs instead of four per 64. H100 f32 4096^3 in three processes (h100-2026-12-06-probe-r8x16.md):
    # r8x16 40.76-40.80 TFLOP/s against 39.95-39.97 for the 256-invocation r8x8 leader (torch 50.9-51.1),
    # first for large problems; .g8/.g4 40.70-40.73, r16x8 40.40-40.42, unpadded (A's stores on 16 banks)
    # 40.76. Gone: 128x256.r8x16 40.44-40.47 and 256x128.r16x8 40.16-40.19 (256 invocations), register-
    # pipelined 39.76, 4-deep 37.8, A kept [i][k] (.ar) 36.6, 16-deep 32.0, 64-invocation 64x128.r8x16 and
    # 128x64.r16x8 32.6-32.7 (the issue-12 run of stop 34 on an H100: compiled 0.81x, library 0.83x)
    "tile128x128.r8x16.k8.l4.db.ap": TiledSpec(128, 128, 8, 8, 16, True, double=True, a_pad=True),
    "tile128x128.r8x16.k8.l4.db.g8.ap": TiledSpec(128, 128, 8, 8, 16, True, double=True, group=8, a_pad=True),
    "tile128x128.r8x16.k8.l4.db.g4.ap": TiledSpec(128, 128, 8, 8, 16, True, double=True, group=4, a_pad=True),
    "tile128x128.r16x8.k8.l4.db.ap": TiledSpec(128, 128, 8, 16, 8, True, double=True, a_pad=True),
    "tile128x128.r8x16.k8.l4.db": TiledSpec(128, 128, 8, 8, 16, True, double=True),
    # B's units stored in whole vec4s (".bv"): one 16-byte store where four 4-byte ones at a dynamic
    # component index hit four invocations a bank (the f16 tiles' one-store units gained 7%,
    # h100-2026-12-06-probe-p16.md). H100 f32 4096^3 in two processes (same report): r8x16.db.ap.bv
    # 3319.4-3319.6 us (41.40 TFLOP/s) against 3368.2-3368.3 without, .g8 3319.7 against 3374.1, the
    # unpadded r8x16.db.bv 3336.8, r8x8.db.ap.bv 3369.5; first for large problems
    "tile128x128.r8x16.k8.l4.db.ap.bv": TiledSpec(128, 128, 8, 8, 16, True, double=True, a_pad=True,
                                                  vec_stores=True),
    "tile128x128.r8x16.k8.l4.db.g8.ap.bv": TiledSpec(128, 128, 8, 8, 16, True, double=True, group=8,
                                                     a_pad=True, vec_stores=True),
    "tile128x128.r8x16.k8.l4.db.bv": TiledSpec(128, 128, 8, 8, 16, True, double=True, vec_stores=True),
    "tile128x128.r8x8.k8.l4.db.ap.bv": TiledSpec(128, 128, 8, 8, 8, True, double=True, a_pad=True,
                                                 vec_stores=True),
    # Gone too: their ".o4" forms (each group of 4 adjacent outputs stored at once, finish4: 16 vector
    # stores an invocation instead of 64 scalar ones), H100 4096^3 f32 35.8 TFLOP/s against 40.0, H200
    # 35.7-35.8 (h100-2026-12-06-probe-o4.md, h200-2026-12-06-probe-f8.json); TiledSpec.out_vec stays
    "gemv.k64n4.sg": GemvSpec(64, 4, True, True),
    "gemv.k64n4.wg": GemvSpec(64, 4, True),
    "gemv.k32n8.wg": GemvSpec(32, 8, True),
    "gemv.n16k16.wg": GemvSpec(16, 16, False),
    "gemv.n64k4.wg": GemvSpec(4, 64, False),
    # streaming (bandwidth) forms: lk lanes per weight row x ln rows, 4 loads in flight per lane
    "gemv.k8n16.u4.sg": GemvSpec(8, 16, True, True, 4),
    "gemv.k16n8.u4.sg": GemvSpec(16, 8, True, True, 4),
    "gemv.k32n4.u4.sg": GemvSpec(32, 4, True, True, 4),
    "gemv.k64n2.u4.sg": GemvSpec(64, 2, True, True, 4),
    "gemv.k8n16.u4": GemvSpec(8, 16, True, False, 4),
    "gemv.k16n8.u4": GemvSpec(16, 8, True, False, 4),
    "gemv.k32n4.u4": GemvSpec(32, 4, True, False, 4),
    "gemv.k64n2.u4": GemvSpec(64, 2, True, False, 4),
    # [K, N] weights: ln invocations along N (16 bytes of columns each) x lk K slices
    "gemv.n8k32.u4": GemvSpec(32, 8, False, False, 4),
    "gemv.n16k16.u4": GemvSpec(16, 16, False, False, 4),
    "gemv.n32k8.u4": GemvSpec(8, 32, False, False, 4),
    # few columns (attention's P @ V, one workgroup per head): 1024 invocations keep more loads in flight
    "gemv.n8k128.u4": GemvSpec(128, 8, False, False, 4),
    # tensor cores: sg_m x sg_n subgroups per workgroup, each fm x fn 16x16 results
    "sgmat.w1x1.f2x2.k32": SgmatSpec(1, 1, 2, 2),
    "sgmat.w2x2.f2x2.k32": SgmatSpec(2, 2, 2, 2),
    "sgmat.w2x2.f2x2.k64": SgmatSpec(2, 2, 2, 2, bk=64),
    "sgmat.w2x2.f4x2.k32": SgmatSpec(2, 2, 4, 2),
    "sgmat.w2x2.f2x4.k32": SgmatSpec(2, 2, 2, 4),
    "sgmat.w4x2.f2x2.k32": SgmatSpec(4, 2, 2, 2),
    "sgmat.w2x4.f2x2.k32": SgmatSpec(2, 4, 2, 2),
    "sgmat.w2x2.f4x4.k32": SgmatSpec(2, 2, 4, 4),
    "sgmat.w4x4.f2x2.k32": SgmatSpec(4, 4, 2, 2),
    "sgmat.w2x4.f4x4.k32": SgmatSpec(2, 4, 4, 4),
    "sgmat.w4x2.f4x4.k32": SgmatSpec(4, 2, 4, 4),
    "sgmat.w2x2.f4x4.k32.g8": SgmatSpec(2, 2, 4, 4, group=8),   # grouped launch order of the tiles
    # the next K tile loaded during the multiplies (".pl"). H200 f16 4096^3
    # (benchmarks/results/h200-2026-12-04-pipelines.md): w2x2.f4x4.k32.pl 156.5 TFLOP/s against 147.5
    "sgmat.w2x2.f4x4.k32.pl": SgmatSpec(2, 2, 4, 4, pipelined=True),
    "sgmat.w2x2.f4x4.k16.pl": SgmatSpec(2, 2, 4, 4, bk=16, pipelined=True),
    # 256-row and 256-column tiles: a quarter less staging traffic per multiply than 128x128 (H200:
    # w4x2.f4x4.k32.pl 177-179, w2x4 162.5; the 64- and 32-row ones 66-131)
    "sgmat.w4x2.f4x4.k32.pl": SgmatSpec(4, 2, 4, 4, pipelined=True),
    "sgmat.w2x4.f4x4.k32.pl": SgmatSpec(2, 4, 4, 4, pipelined=True),
    "sgmat.w4x2.f4x4.k16.pl": SgmatSpec(4, 2, 4, 4, bk=16, pipelined=True),
    "sgmat.w4x2.f2x4.k32.pl": SgmatSpec(4, 2, 2, 4, pipelined=True),
    "sgmat.w2x4.f4x2.k32.pl": SgmatSpec(2, 4, 4, 2, pipelined=True),
    "sgmat.w4x4.f2x2.k32.pl": SgmatSpec(4, 4, 2, 2, pipelined=True),
    "sgmat.w2x2.f2x2.k32.pl": SgmatSpec(2, 2, 2, 2, pipelined=True),
    "sgmat.w1x1.f2x2.k32.pl": SgmatSpec(1, 1, 2, 2, pipelined=True),
    "sgmat.w2x2.f2x2.k64.pl": SgmatSpec(2, 2, 2, 2, bk=64, pipelined=True),
    # two K tiles in flight (".pl2"): H200 w4x2.f4x4.k32.pl2 178.9, .pl2.g8 185.7, k16.pl3 162.1 (w2x4
    # 171.3, w2x2 139.2, k16.pl2 154.4, .pl.g8 177-179: gone) — the loads were not what held the staging
    # back (its stores were: ".rot" below)
    "sgmat.w4x2.f4x4.k32.pl2": SgmatSpec(4, 2, 4, 4, pipelined=2),
    "sgmat.w4x2.f4x4.k16.pl3": SgmatSpec(4, 2, 4, 4, bk=16, pipelined=3),
    "sgmat.w4x2.f4x4.k32.pl2.g8": SgmatSpec(4, 2, 4, 4, group=8, pipelined=2),
    # staging stores rotated per invocation (".rot", sgmat_wgsl.store_rotation). H200 f16 4096^3: the
    # stores alone 356-367 us of the pipelined 256x128 kernels' 744-775 (4 invocations per bank);
    # w4x2.f4x4.k32.pl.g8.rot 217.4-217.5 TFLOP/s in two probes (first for large problems), .pl.rot
    # 210.5-210.8, w2x2.f4x4.k32.pl.g8.rot 181; gone: .pl2.g8.rot 175.7 (registers), .g4/.g16 218.1/217.1,
    # w2x4.pl2.g8.rot 159, k16.pl3.rot 158, w2x2.k64.pl.g8.rot 96, the unpipelined w2x2.f4x4.k32.g8.rot
    # 60.8 (its rotation of a loop-carried register costs more than it saves)
    "sgmat.w4x2.f4x4.k32.pl.rot": SgmatSpec(4, 2, 4, 4, pipelined=True, rotate=True),
    "sgmat.w4x2.f4x4.k32.pl.g8.rot": SgmatSpec(4, 2, 4, 4, group=8, pipelined=True, rotate=True),
    "sgmat.w2x4.f4x4.k32.pl.g8.rot": SgmatSpec(2, 4, 4, 4, group=8, pipelined=True, rotate=True),
    "sgmat.w2x2.f4x4.k32.pl.g8.rot": SgmatSpec(2, 2, 4, 4, group=8, pipelined=True, rotate=True),
    "sgmat.w2x2.f2x2.k32.pl.rot": SgmatSpec(2, 2, 2, 2, pipelined=True, rotate=True),
    # two K-tile buffers, one barrier per tile (".db"): all slower on the H200, with a `cur` buffer index
    # or constant offsets (w4x2.f4x4.k16.db.g8 152-158, w2x4.f4x4.k16 156-158, w4x2.f2x4.k32 137-146,
    # w2x2.f4x4.k32 90-109 against 217.4); warp-specialized tiles (subgroups that only stage) ran at
    # 35-100 and went (h200-2026-12-04-pipelines.md)
    "sgmat.w2x2.f4x4.k32.db.g8": SgmatSpec(2, 2, 4, 4, group=8, double=True),
    "sgmat.w4x2.f4x4.k16.db.g8": SgmatSpec(4, 2, 4, 4, bk=16, group=8, double=True),
    # the double-buffered tiles with rotated stores and with their loads two tiles ahead (".db.pl2": a
    # 16-deep tile's multiplies may end before its loads land). H100 f16 4096^3: w2x4.f4x4.k16.db.pl2.g8.rot
    # 160.7-161.0, w4x2.f4x4.k16.db.g8.rot 156.5, .db.pl2.rot 153.2, .db.pl2.g8.rot 152.2,
    # w2x2.f4x4.k32.db.pl2.g8.rot 99.0 against 216-217 for w4x2.f4x4.k32.pl.g8.rot: gone but the first.
    # 512-invocation tiles of 256x128 (16 subgroups of 64x32 or 32x64 results: half the accumulators per
    # invocation): w8x2.f2x4 224.9 (first for large problems), w4x4.f4x2 207.7
    "sgmat.w2x4.f4x4.k16.db.pl2.g8.rot": SgmatSpec(2, 4, 4, 4, bk=16, group=8, pipelined=2, rotate=True,
                                                  double=True),
    "sgmat.w4x4.f4x2.k32.pl.g8.rot": SgmatSpec(4, 4, 4, 2, group=8, pipelined=True, rotate=True),
    "sgmat.w8x2.f2x4.k32.pl.g8.rot": SgmatSpec(8, 2, 2, 4, group=8, pipelined=True, rotate=True),
    # around the 512-invocation 256x128 tile. H100 f16 4096^3 (benchmarks/results/h100-2026-12-05-probes2.md,
    # the leader 223.1 there): tiles 16 rows down each column (.g16) 223.7 and the 128x256 tile of 16
    # subgroups 223.0, level with it; .pl2 174.7, ungrouped 189.6, unrotated 184.7, k16.pl3 145.3: gone
    "sgmat.w8x2.f2x4.k32.pl.g16.rot": SgmatSpec(8, 2, 2, 4, group=16, pipelined=True, rotate=True),
    "sgmat.w4x4.f2x4.k32.pl.g8.rot": SgmatSpec(4, 4, 2, 4, group=8, pipelined=True, rotate=True),
    # staging units 8 lines at a time (".dn": on a 16-byte-store bank model the 256x128 tiles' A stores
    # take the least, 4 cycles a warp, unrotated 8): H100 w8x2.f2x4.k32.pl.g8.dn 129.7 TFLOP/s,
    # w4x2.f4x4 127.3 against 184.7 unrotated: a quarter-warp's 16-byte loads then read 8 rows' lines,
    # not 2 (gone but the first). Two 16-deep K-tile buffers of the 16-subgroup 256x128 tile (one
    # barrier per K tile), which fit in 48 KiB with the results passed through half a scratch in two
    # turns (".cs2"): .db.pl2.g8.dn.cs2 136.5, .db.g8.dn.cs2 119.5 (gone but the first)
    "sgmat.w8x2.f2x4.k32.pl.g8.dn": SgmatSpec(8, 2, 2, 4, group=8, pipelined=True, order="down"),
    # the staging stores indexed from one base per unit (no robustness clamps) and the fragment loads at
    # constant offsets (no robustness branches). H100 f16 4096^3
    # (benchmarks/results/h100-2026-12-05-probes3.md):
    # w8x2.f2x4.k32.pl.g8.rot 224.9 -> 244.2 -> 249-251, the 128x256 tile of 16 subgroups 32x64
    # (w4x4.f2x4.k32.pl.g8.rot) 223 -> 255 -> 258-261 (first for large problems), .g4 259.2, .g16 258.6,
    # ungrouped 254.0; B stored in whole 16-byte units along its rows (".bp", A rotated) 255.0 on the
    # 256x128 tile, 243-245 on 128x256; units in pairs of lines 4 apart (".pr", 16-byte stores on all
    # 32 banks, unrotated) 222.4 (the rotated stores alone 156 us, these 199); 48-deep K tiles with the
    # results in four turns (k48.cs4, a third fewer barriers) 178.2 and 157.4, and the turns alone
    # (k32.cs4) 219.6; unrotated 217.2 / 202.0, 64x32 subgroups w2x8.f4x2 248.2, 128x128 tiles of 256
    # invocations (w4x2.f2x4, two workgroups an SM if they fit) 165.0, of 512 (w4x4.f2x2) 169.9: gone
    "sgmat.w4x4.f2x4.k32.pl.g4.rot": SgmatSpec(4, 4, 2, 4, group=4, pipelined=True, rotate=True),
    "sgmat.w8x2.f2x4.k32.pl.g8.rot.bp": SgmatSpec(8, 2, 2, 4, group=8, pipelined=True, rotate=True,
                                                 plain_b=True),
    "sgmat.w4x4.f2x4.k32.pl.g8.pr": SgmatSpec(4, 4, 2, 4, group=8, pipelined=True, order="pairs"),
    "sgmat.w8x2.f2x4.k16.db.pl2.g8.dn.cs2": SgmatSpec(8, 2, 2, 4, bk=16, group=8, pipelined=2, double=True,
                                                     order="down", results_rounds=2),
    # results stored 4 adjacent columns a lane (".o4", finish4: per 16x16 matrix two 8-byte stores a lane
    # instead of eight 2-byte ones, and a quarter of the epilogue's index arithmetic and bounds checks,
    # where the output's rows are 4-aligned); not yet timed on a GPU
    "sgmat.w4x4.f2x4.k32.pl.g8.rot.o4": SgmatSpec(4, 4, 2, 4, group=8, pipelined=True, rotate=True,
                                                 out_vec=True),
    "sgmat.w4x4.f2x4.k32.pl.g4.rot.o4": SgmatSpec(4, 4, 2, 4, group=4, pipelined=True, rotate=True,
                                                 out_vec=True),
    "sgmat.w8x2.f2x4.k32.pl.g8.rot.bp.o4": SgmatSpec(8, 2, 2, 4, group=8, pipelined=True, rotate=True,
                                                    plain_b=True, out_vec=True),
    # K tiles as arrays of 16-byte words (".p16", gpuweb#6345's word-typed subgroupMatrixLoad): one
    # 16-byte store per staging unit instead of eight 2-byte ones, and the results through the K tiles
    # after the loop instead of a 16 KiB scratch (30 KiB of workgroup memory for the 128x256 tile, 46
    # with .rot). Where A is not staged along K the variant falls back to its .rot form. H100 f16 4096^3
    # (benchmarks/results/h100-2026-12-06-probe-p16.md, three processes): the 128x256 tile 281.0-285.3
    # TFLOP/s ungrouped, .g16 281.7-283.7, .g8 282.8, .g4 281.2-281.3 against 262.4 for .g4.rot.o4; two
    # tiles ahead 278.9. Gone: A in pairs of lines (.pr) 268.1, 48-deep K tiles 268.1 (a third fewer
    # barriers), the 256x128 tiles w8x2.f2x4 267.9-270.4 / w4x4.f4x2 257.2 / w4x2.f4x4 226.7, w2x8.f4x2
    # 267.2, 16-deep double-buffered 128x256 169.0, and the tiles that the freed scratch let fit: 128x128
    # of 256 invocations (two workgroups an SM) 181.4-182.4, double-buffered 155.2, 64-deep 219.6,
    # 128x192 of 384 invocations 188.1, double-buffered 168.2
    "sgmat.w4x4.f2x4.k32.pl.o4.p16": SgmatSpec(4, 4, 2, 4, pipelined=True, rotate=True, out_vec=True,
                                               packed=True),
    "sgmat.w4x4.f2x4.k32.pl.g16.o4.p16": SgmatSpec(4, 4, 2, 4, group=16, pipelined=True, rotate=True,
                                                   out_vec=True, packed=True),
    "sgmat.w4x4.f2x4.k32.pl.g8.o4.p16": SgmatSpec(4, 4, 2, 4, group=8, pipelined=True, rotate=True,
                                                  out_vec=True, packed=True),
    "sgmat.w4x4.f2x4.k32.pl.g4.o4.p16": SgmatSpec(4, 4, 2, 4, group=4, pipelined=True, rotate=True,
                                                  out_vec=True, packed=True),
    "sgmat.w4x4.f2x4.k32.pl2.g4.o4.p16": SgmatSpec(4, 4, 2, 4, group=4, pipelined=2, rotate=True,
                                                   out_vec=True, packed=True),
    # the scalar epilogue, for outputs whose rows are not 4-aligned (untimed: one change from the leader)
    "sgmat.w4x4.f2x4.k32.pl.p16": SgmatSpec(4, 4, 2, 4, pipelined=True, rotate=True, packed=True),
    # the results alternately through the K tiles and a scratch of their own (".pp"): one barrier per
    # result matrix, not two (44 KiB of workgroup memory). H100 f16 4096^3 in two processes
    # (h100-2026-12-06-probe-p16.md): 477.4 / 473.8 us (287.9 / 290.1 TFLOP/s) against 488.7 / 480.4 for
    # the .p16 leader, .g16.pp 483.6 against 487.3; first for large problems
    "sgmat.w4x4.f2x4.k32.pl.o4.p16.pp": SgmatSpec(4, 4, 2, 4, pipelined=True, rotate=True, out_vec=True,
                                                  packed=True, pingpong=True),
    "sgmat.w4x4.f2x4.k32.pl.p16.pp": SgmatSpec(4, 4, 2, 4, pipelined=True, rotate=True, packed=True,
                                               pingpong=True),
    "sgmat.w4x4.f2x4.k32.pl.g16.o4.p16.pp": SgmatSpec(4, 4, 2, 4, group=16, pipelined=True, rotate=True,
                                                      out_vec=True, packed=True, pingpong=True),
}
# Split-K forms of the tiles that few-row f32 problems prefer (the H200's autotuner chose 32x64 for
# ViT-B/16's 197-token matmuls: 84 workgroups for 132 SMs): "<tile>.s<splits>"
SPLIT_TILES = ("tile32x64.r2x4.k32", "tile64x64.r4x4.k16.l4")
SPLIT_COUNTS = (2, 4, 8)
VARIANTS.update({f"{tile}.s{count}": replace(VARIANTS[tile], splits=count)   # type: ignore[type-var]
                 for tile in SPLIT_TILES for count in SPLIT_COUNTS})
# split-K is offered while the tiles (times batch) are fewer than this, about two per SM of a large GPU
SPLIT_BELOW_WORKGROUPS = 264
SPLIT_MIN_K = 512
SPLIT_MIN_SLICE = 128      # K per slice: a few K tiles each, or the partials cost more than they save
SPLIT_AFTER = 4            # split candidates follow this many unsplit tiled ones (the autotuner times 6)
COMBINE_THREADS = 256

# H200 f16 with 8 halves of row padding (benchmarks/results/h200-2026-12-01-sgmat-pad.md): 4096^3
# w2x2.f4x4 148 TFLOP/s, w4x2.f4x4 141, w2x4.f4x4 130; 128x768x3072 w1x1.f2x2 26.3 (1.6x torch CUDA),
# w2x2.f2x2.k64 25.4. Register prefetch of the next K tile was slower (register pressure), single-subgroup
# 4x2/4x4 fragment tiles 3-5x slower. 64-deep K tiles (half the barriers per K) were slower still
# (benchmarks/results/h200-2026-12-04-sgmat-k64.json: w2x2.f4x4.k64 34 TFLOP/s against 149 for k32,
# w4x2.f2x2.k64 83 against 93). benchmarks/results/h200-2026-12-04-probes2.md: the grouped launch order
# w2x2.f4x4.k32.g8 149-155 against 147-150 in five probes (first now); no K tiles (fragments from the
# operands) 72; K tiles staged by subgroup-matrix loads and stores 54-65; skewed staging stores 60 (the
# driver vectorises the unskewed ones); B fragments loaded one at a time 148 (unchanged).
# H100 (benchmarks/results/h100-2026-12-05-probes.md): 16 subgroups of 32x64 in the 256x128 tile 224.9
# TFLOP/s against 216-217 for 8 of 64x64 (64x32: 207.7); every double-buffered form 99-161
# H100 (h100-2026-12-05-probes2.md): .g16 223.7 and w4x4.f2x4 223.0 level with the leader (223.1)
# H100 (h100-2026-12-05-probes3.md): without robustness clamps and branches the 128x256 tile of 16
# subgroups leads, 258-261 TFLOP/s (0.38-0.39x torch CUDA), the 256x128 one 249-255
# H100 (h100-2026-12-06-probe-o4.md): the ".o4" forms lead, g4.rot.o4 267.3 and g8.rot.o4 267.1 TFLOP/s
# against 263.9 and 259.3 for their scalar-store forms (the run's autotuner: 531 us against 538-539).
# Where the output's rows are not 4-aligned the .o4 forms are not offered and the list closes up.
# H100 (h100-2026-12-06-probe-r8x16.md), not added: two 16-deep K-tile buffers of the 128x256 tile 137-193
# TFLOP/s against 262; B's fragments loaded from the operand with only A staged (two 32-deep A buffers, or
# one 64-deep) 74-106: a right matrix from a storage buffer costs far more than from workgroup memory.
# The packed ".p16" forms lead since (h100-2026-12-06-probe-p16.md: 281-285 against 262; the stop-35 run's
# autotuner 498-510 us against 529-531 for the .rot.o4 forms), their ".pp" epilogue first (288-290).
# The first six are the .o4 forms where outputs are 4-aligned (the scalar-epilogue ones close up to the
# head where they are not). H200 (h200-2026-12-06-issue12-stop37.md), not added: 8 subgroups of 64x64 in
# the 128x256 tile 576.2-576.6 us and of 32x128 588.1, against 483.7 for the .pp leader, so fewer
# fragment loads per multiply do not pay for half the subgroups.
SGMAT_LARGE = ["sgmat.w4x4.f2x4.k32.pl.o4.p16.pp", "sgmat.w4x4.f2x4.k32.pl.g16.o4.p16.pp",
               "sgmat.w4x4.f2x4.k32.pl.o4.p16", "sgmat.w4x4.f2x4.k32.pl.g16.o4.p16",
               "sgmat.w4x4.f2x4.k32.pl.g8.o4.p16", "sgmat.w4x4.f2x4.k32.pl.g4.o4.p16",
               "sgmat.w4x4.f2x4.k32.pl.p16.pp", "sgmat.w4x4.f2x4.k32.pl.p16",
               "sgmat.w4x4.f2x4.k32.pl2.g4.o4.p16",
               "sgmat.w4x4.f2x4.k32.pl.g8.rot.o4", "sgmat.w4x4.f2x4.k32.pl.g4.rot.o4",
               "sgmat.w4x4.f2x4.k32.pl.g8.rot", "sgmat.w4x4.f2x4.k32.pl.g4.rot",
               "sgmat.w8x2.f2x4.k32.pl.g8.rot.bp.o4", "sgmat.w8x2.f2x4.k32.pl.g8.rot.bp",
               "sgmat.w8x2.f2x4.k32.pl.g16.rot", "sgmat.w8x2.f2x4.k32.pl.g8.rot",
               "sgmat.w4x4.f4x2.k32.pl.g8.rot", "sgmat.w4x2.f4x4.k32.pl.g8.rot",
               "sgmat.w4x2.f4x4.k32.pl.rot", "sgmat.w4x2.f4x4.k32.pl2.g8"]
SGMAT_SKINNY = ["sgmat.w1x1.f2x2.k32", "sgmat.w2x2.f2x2.k64", "sgmat.w2x2.f2x2.k32", "sgmat.w4x2.f2x2.k32",
                "sgmat.w2x2.f4x2.k32", "sgmat.w2x2.f2x4.k32"]

GEMV_MAX_ROWS = 4      # M at or below this (or N, transposed) runs as matrix-vector
VEC_SUFFIX = ".v4"     # the vec4-load form of a variant


def tensor_core_subgroup_size(caps: DeviceCaps) -> int | None:
    """The subgroup size the f16 tensor-core (sgmat) variants run with on `caps`, or None where they
    cannot (no f16x16x16 -> f32 subgroup matrices, or no fixed subgroup size dividing 256)."""
    sg = _sg_size(caps)
    ok = (caps.shader_f16 and caps.subgroup_matrix and sg and 256 % sg == 0
          and ("f16", "f32", 16, 16, 16) in caps.subgroup_matrix_configs)
    return sg if ok else None


def _sg_size(caps: DeviceCaps) -> int | None:
    if caps.subgroup_size:
        return caps.subgroup_size
    lo, hi = caps.limits.get("subgroup-min-size"), caps.limits.get("subgroup-max-size")
    return int(lo) if lo and lo == hi else None


def _fits(caps: DeviceCaps, threads: int, nbytes: int) -> bool:
    return (threads <= caps.limit("max-compute-invocations-per-workgroup", 256)
            and nbytes <= caps.limit("max-compute-workgroup-storage-size", 16384))


def _tiled_modes(p: MatmulProblem) -> tuple[str, str]:
    """Load form of A and B in the tiled kernel: vec4 along k/i when possible, else the scalar order
    that walks the contiguous axis."""
    if p.a.vec4_along("col", p.k):
        a = "k"
    elif p.a.vec4_along("row", p.m):
        a = "i"
    else:
        a = "si" if p.a.row_stride == 1 and p.a.col_stride != 1 else "sk"
    if p.b.vec4_along("col", p.n):
        b = "i"
    elif p.b.vec4_along("row", p.k):
        b = "k"
    else:
        b = "sk" if p.b.row_stride == 1 and p.b.col_stride != 1 else "si"
    return a, b


def vec8_axis(lay: Layout, rows: int, cols: int) -> str:
    """The axis ("cols", "rows") along which an f16 operand can be staged 8 elements (16 bytes) at a
    time: stride 1 there, its extent, the offset and the other strides multiples of 8; else ""."""
    for axis, unit, extent, other in (("cols", lay.col_stride, cols, lay.row_stride),
                                      ("rows", lay.row_stride, rows, lay.col_stride)):
        if unit == 1 and extent % 8 == 0 and all(x % 8 == 0 for x in (lay.offset, other, lay.batch_stride)):
            return axis
    return ""


def _gemv_problem(p: MatmulProblem) -> MatmulProblem | None:
    """The orientation in which the gemv kernel runs `p` (few rows), or None."""
    if p.m <= GEMV_MAX_ROWS:
        return p
    if p.n <= GEMV_MAX_ROWS:
        return p.transposed()
    return None


def _gemv_vec(p: MatmulProblem) -> bool:
    return p.a.vec4_along("col", p.k) and p.b.vec4_along("row", p.k)


def _along(lay: Layout, axis: str, extent: int, width: int) -> bool:
    """Whole `width`-element vectors along `axis` ("row"/"col", stride 1 there, `extent` elements)."""
    unit, other = (lay.col_stride, lay.row_stride) if axis == "col" else (lay.row_stride, lay.col_stride)
    return unit == 1 and all(x % width == 0 for x in (extent, lay.offset, other, lay.batch_stride))


def stream_width(g: MatmulProblem, k_fast: bool) -> int:
    """Elements per 16-byte load of the streaming gemv on the gemv-oriented `g` (8 halves, 4 floats),
    or 1 when its layouts do not allow vector loads."""
    vw = 8 if g.dtype == "f16" else 4
    if k_fast:
        ok = _along(g.a, "col", g.k, vw) and _along(g.b, "row", g.k, vw)
    else:
        ok = _along(g.b, "col", g.n, vw)
    return vw if ok else 1


def _stream_order(g: MatmulProblem, k_fast: bool, vw: int, sg: int | None) -> list[str]:
    """The streaming gemv variants for `g`, best guess first: enough lanes per weight row that each
    walks ~8 loads and the grid holds >= 32K lanes (K-contiguous), or columns per workgroup by N."""
    if k_fast:
        nvec = max(1, g.k // vw)
        lanes = 8
        while lanes < 64 and (nvec // lanes >= 16 or (g.n * lanes < 32768 and nvec // lanes >= 8)):
            lanes *= 2
        order = sorted((8, 16, 32, 64), key=lambda x: abs(x.bit_length() - lanes.bit_length()))
        names = []
        for x in order:
            base = f"gemv.k{x}n{128 // x}.u4"
            if sg and (x % sg == 0 or sg % x == 0):
                names.append(base + ".sg")
            names.append(base)
        return names
    per = max(1, g.n // vw)
    if per <= 8:
        return ["gemv.n8k128.u4", "gemv.n8k32.u4", "gemv.n16k16.u4", "gemv.n32k8.u4"]
    cols = 32 if per >= 256 else 16 if per >= 64 else 8
    return sorted(["gemv.n8k32.u4", "gemv.n16k16.u4", "gemv.n32k8.u4", "gemv.n8k128.u4"],
                  key=lambda n: n != f"gemv.n{cols}k{256 // cols}.u4")


def variants(p: MatmulProblem, caps: DeviceCaps) -> list[str]:
    """Variant names that can run `p` on `caps`, best default first."""
    p = p.normalized()
    if p.dtype not in ("f32", "f16") or (p.dtype == "f16" and not caps.shader_f16):
        return []
    names: list[str] = []
    g = _gemv_problem(p)
    if g is not None:
        b_k_contig = g.b.row_stride == 1
        stream = _stream_variants(g, caps, b_k_contig)
        # hardware GPUs run the streaming forms first (eager decode gemvs are below the autotuner's
        # FLOP floor, so the default is what runs; plans time the first few); software Vulkan keeps
        # the cheap split-K default
        if not caps.cpu:
            names += stream
        for name, spec in VARIANTS.items():
            if not isinstance(spec, GemvSpec) or spec.unroll:
                continue
            sg = _sg_size(caps)
            if spec.subgroup and not (caps.subgroups and sg and spec.lk % sg == 0 and spec.k_fast):
                continue
            if spec.k_fast != b_k_contig:
                continue
            if _fits(caps, spec.threads, spec.workgroup_bytes(p.dtype, GEMV_MAX_ROWS, sg or 1)):
                if spec.k_fast and _gemv_vec(g):
                    names.append(name + VEC_SUFFIX)
                names.append(name)
        if caps.cpu:
            names += stream
    sg = tensor_core_subgroup_size(caps)
    out4 = p.out.vec4_along("col", p.n)   # the ".o4" forms store 4 adjacent outputs at once
    if p.dtype == "f16" and sg and min(p.m, p.n) >= 16:
        first = SGMAT_LARGE if min(p.m, p.n) >= 1024 else SGMAT_SKINNY
        b_cols = vec8_axis(p.b, p.k, p.n) == "rows"   # how sgmat_source stores this problem's B tile
        for name in first + [n for n in VARIANTS if n.startswith("sgmat") and n not in first]:
            spec = VARIANTS[name]
            if spec.out_vec and not (out4 and sg <= sgmat_wgsl.OUT_VEC_MAX_SUBGROUP):
                continue
            threads = spec.sg_m * spec.sg_n * sg
            if _fits(caps, threads, spec.workgroup_bytes(p.dtype, b_cols)):
                names.append(name)
    a_mode, b_mode = _tiled_modes(p)
    vec = a_mode in ("k", "i") or b_mode in ("k", "i")
    # the [i][k] A tiles (".ar") and padded [k][i] ones (".ap") read A in vec4s along K: offered in their
    # vec4 form for such an A only
    tiled = [n for n, s in VARIANTS.items() if isinstance(s, TiledSpec) and s.splits == 1
             and (a_mode == "k" or not (s.a_rows or s.a_pad)) and (out4 or not s.out_vec)]
    # default orders from the H200 runs of 2026-12-01 and 2026-12-04 (.db: h200-2026-12-04-pipelines.md);
    # the padded A tiles (h100-2026-12-05-probes2.md: H100 and H200), and ahead of them the 128-invocation
    # 8x16 ones (h100-2026-12-06-probe-r8x16.md), their whole-vec4 B stores (.bv) first
    if p.m * p.n >= 1 << 20 and p.m >= 256:
        order = ["tile128x128.r8x16.k8.l4.db.ap.bv", "tile128x128.r8x16.k8.l4.db.g8.ap.bv",
                 "tile128x128.r8x16.k8.l4.db.bv", "tile128x128.r8x16.k8.l4.db.ap",
                 "tile128x128.r8x16.k8.l4.db.g8.ap", "tile128x128.r8x16.k8.l4.db.g4.ap",
                 "tile128x128.r16x8.k8.l4.db.ap",
                 "tile128x128.r8x8.k8.l4.db.ap", "tile128x128.r8x8.k8.l4.db.g8.ap",
                 "tile128x64.r8x4.k16.l4.db", "tile128x128.r8x8.k8.l4.pl.ap", "tile128x128.r8x8.k8.l4.db",
                 "tile128x128.r8x8.k8.l4.pl", "tile128x64.r8x4.k16.l4", "tile128x128.r8x8.k16"] + tiled
    elif p.m <= 16:
        order = ["tile16x64.r1x4.k32", "tile32x32.r2x2.k16", "tile32x64.r2x4.k32"]
    elif p.m <= 512 or p.m * p.n < 1 << 18:
        order = ["tile64x64.r4x4.k16.l4.db", "tile64x64.r4x4.k16.l4", "tile64x64.r4x4.k32",
                 "tile64x64.r4x4.k16", "tile32x64.r2x4.k32", "tile32x32.r2x2.k16", "tile16x64.r1x4.k32"]
    else:
        order = ["tile64x64.r4x4.k16", "tile128x64.r8x4.k16", "tile64x64.r4x4.k32",
                 "tile128x128.r8x8.k16", "tile32x64.r2x4.k32"]
    fitting = [n for n in dict.fromkeys(order + tiled)
               if n in tiled and _fits(caps, VARIANTS[n].threads, VARIANTS[n].workgroup_bytes(p.dtype))]
    # vec4 forms first: the autotuner times the first few candidates only
    tiled_names = (([n + VEC_SUFFIX for n in fitting] if vec else [])
                   + [n for n in fitting if not (VARIANTS[n].a_rows or VARIANTS[n].a_pad
                                                 or VARIANTS[n].out_vec)])
    tiled_names[SPLIT_AFTER:SPLIT_AFTER] = [n + (VEC_SUFFIX if vec else "") for n in _split_variants(p, caps)]
    return names + tiled_names


def split_count(p: MatmulProblem, spec: TiledSpec) -> int | None:
    """The K slices worth trying for `p` with `spec`'s tile, or None: only few output tiles (below
    SPLIT_BELOW_WORKGROUPS, batch included) and K of at least SPLIT_MIN_K; the fewest slices that reach
    that many workgroups, each at least SPLIT_MIN_SLICE deep."""
    tiles = ceil_div(p.m, spec.bm) * ceil_div(p.n, spec.bn) * p.batch
    if tiles >= SPLIT_BELOW_WORKGROUPS or p.k < SPLIT_MIN_K or min(p.m, p.n) <= GEMV_MAX_ROWS:
        return None
    counts = [c for c in SPLIT_COUNTS if p.k // c >= SPLIT_MIN_SLICE]
    if not counts:
        return None
    return next((c for c in counts if tiles * c >= SPLIT_BELOW_WORKGROUPS), counts[-1])


def _split_variants(p: MatmulProblem, caps: DeviceCaps) -> list[str]:
    """The split-K tiled variants offered for `p` (one slice count per tile, see `split_count`)."""
    names = []
    limit = caps.limit("max-compute-workgroups-per-dimension", 65535)
    for tile in SPLIT_TILES:
        spec = VARIANTS[tile]
        assert isinstance(spec, TiledSpec)
        count = split_count(p, spec)
        if count is None or not _fits(caps, spec.threads, spec.workgroup_bytes(p.dtype)):
            continue
        # the partial sums are one f32 binding; the slices of every batch share grid z
        if (4 * count * p.batch * p.m * p.n > caps.limit("max-storage-buffer-binding-size", 128 << 20)
                or count * p.batch > limit):
            continue
        names.append(f"{tile}.s{count}")
    return names


def _stream_variants(g: MatmulProblem, caps: DeviceCaps, k_fast: bool) -> list[str]:
    """The streaming gemv names (16-byte forms first when the layouts allow them) that fit `caps`."""
    if not (g.b.row_stride == 1 or g.b.col_stride == 1):
        return []
    sg = _sg_size(caps) if caps.subgroups else None
    vw = stream_width(g, k_fast)
    limit = caps.limit("max-compute-workgroups-per-dimension", 65535)
    fitting = []
    for name in _stream_order(g, k_fast, vw, sg):
        spec = VARIANTS[name]
        cols = spec.ln * (vw if not k_fast else 1)
        if (ceil_div(g.n, cols) <= limit
                and _fits(caps, spec.threads, spec.workgroup_bytes(g.dtype, GEMV_MAX_ROWS, sg or 1))):
            fitting.append(name)
    # 16-byte forms first: the autotuner and compiled plans take the first few candidates only
    return ([n + VEC_SUFFIX for n in fitting] if vw > 1 else []) + fitting


def _params(p: MatmulProblem) -> tuple[int, ...]:
    zero = [0, 0, 0, 0]
    return tuple([p.m, p.n, p.k, p.batch] + p.a.words() + p.b.words() + p.out.words()
                 + (p.bias.words() if p.bias else zero) + (p.residual.words() if p.residual else zero)
                 + [f32_word(p.alpha), f32_word(p.beta), 0, 0])


def _check(p: MatmulProblem, caps: DeviceCaps, grid: tuple[int, int, int]) -> None:
    limit = caps.limit("max-compute-workgroups-per-dimension", 65535)
    if max(grid) > limit:
        raise ValueError(f"matmul {p.batch}x{p.m}x{p.n}x{p.k}: grid {grid} exceeds the device's "
                         f"{limit} workgroups per dimension; split the problem along batch/M/N")


def plan_matmul(p: MatmulProblem, caps: DeviceCaps, variant: str | None = None) -> KernelLaunch:
    """The launch of `p` on `caps` (`variant`: one of `variants(p, caps)`, default the first)."""
    names = variants(p, caps)
    if not names:
        if p.dtype == "f16":
            raise TypeError("matmul: dtype f16 needs the adapter feature 'shader-f16'")
        raise TypeError(f"matmul: dtype {p.dtype} is not supported by the library (f32, f16)")
    p = p.normalized()
    if p.activation not in ACTIVATIONS:
        raise ValueError(f"matmul epilogue: unknown activation {p.activation!r} "
                         f"({sorted(map(str, ACTIVATIONS))})")
    variant = variant or names[0]
    if variant not in names:
        raise ValueError(f"matmul variant {variant!r} is not one of {names}")
    base = variant.removesuffix(VEC_SUFFIX)
    vec = variant.endswith(VEC_SUFFIX)
    spec = VARIANTS[base]
    if isinstance(spec, TiledSpec) and spec.splits > 1:
        raise ValueError(f"matmul variant {variant!r} is split-K, two dispatches with a scratch buffer: "
                         "plan it with plan_matmul_steps")
    run = p
    if isinstance(spec, GemvSpec):
        run = _gemv_problem(p)
        assert run is not None
    epi = wgsl.Epilogue(p.dtype, p.bias is not None, p.residual is not None, p.activation)
    if isinstance(spec, TiledSpec):
        a_mode, b_mode = _tiled_modes(p)
        if not vec:
            a_mode = {"k": "sk", "i": "si"}.get(a_mode, a_mode)
            b_mode = {"k": "sk", "i": "si"}.get(b_mode, b_mode)
        src = wgsl.tiled_source(epi, spec.bm, spec.bn, spec.bk, spec.tm, spec.tn, a_mode, b_mode, spec.lds4,
                                double=spec.double, group=spec.group, pipelined=spec.pipelined,
                                a_rows=spec.a_rows, a_pad=spec.a_pad, out_vec=spec.out_vec,
                                vec_stores=spec.vec_stores)
        grid = (ceil_div(p.n, spec.bn), ceil_div(p.m, spec.bm), p.batch)
        wg = (spec.bn // spec.tn, spec.bm // spec.tm, 1)
    elif isinstance(spec, GemvSpec) and spec.unroll:
        mr = 1 << max(0, (min(run.m, GEMV_MAX_ROWS) - 1).bit_length())
        vw = stream_width(run, spec.k_fast) if vec else 1
        if spec.k_fast:
            sg = _sg_size(caps) if spec.subgroup else None
            src = wgsl.gemv_stream_k_source(epi, spec.lk, spec.ln, spec.unroll, mr, vw, sg)
            grid = (ceil_div(run.n, spec.ln), ceil_div(run.m, mr), p.batch)
        else:
            src = wgsl.gemv_stream_n_source(epi, spec.ln, spec.lk, spec.unroll, mr, vw)
            grid = (ceil_div(run.n, spec.ln * vw), ceil_div(run.m, mr), p.batch)
        wg = (spec.threads, 1, 1)
    elif isinstance(spec, GemvSpec):
        mr = 1 << max(0, (min(run.m, GEMV_MAX_ROWS) - 1).bit_length())
        sg = _sg_size(caps) if spec.subgroup else None
        src = wgsl.gemv_source(epi, spec.lk, spec.ln, mr, vec, spec.k_fast, sg)
        grid = (ceil_div(run.n, spec.ln), ceil_div(run.m, mr), p.batch)
        wg = (spec.lk, spec.ln, 1) if spec.k_fast else (spec.ln, spec.lk, 1)
    else:
        sg = _sg_size(caps)
        assert sg is not None
        vec_a, vec_b = vec8_axis(p.a, p.m, p.k), vec8_axis(p.b, p.k, p.n)
        src = sgmat_wgsl.sgmat_source(epi, spec.sg_m, spec.sg_n, spec.fm, spec.fn, spec.bk, sg, vec_a, vec_b,
                                spec.pad, spec.group, spec.pipelined, spec.rotate, spec.double, spec.order,
                                spec.results_rounds, spec.plain_b, spec.out_vec, spec.packed, spec.pingpong)
        bm, bn = spec.tile
        grid = (ceil_div(p.n, bn), ceil_div(p.m, bm), p.batch)
        wg = (spec.sg_m * spec.sg_n * sg, 1, 1)
    _check(run, caps, grid)
    bindings = [PARAMS, "a", "b", "out"] + (["bias"] if p.bias else []) + (["residual"] if p.residual else [])
    if run is not p:  # transposed: A' is B and B' is A
        bindings[1], bindings[2] = "b", "a"
    read_only = frozenset(i for i, r in enumerate(bindings) if r not in ("out", PARAMS))
    return KernelLaunch(name=f"matmul.{p.dtype}.{variant}", wgsl=src, grid=grid, workgroup_size=wg,
                        bindings=tuple(bindings), params=_params(run), read_only=read_only)


@dataclass(frozen=True)
class MatmulPlan:
    """The dispatches of one matmul variant, in order, and the scratch they share (role -> bytes)."""

    steps: tuple[KernelLaunch, ...]
    scratch: dict[str, int]


def plan_matmul_steps(p: MatmulProblem, caps: DeviceCaps, variant: str | None = None) -> MatmulPlan:
    """The dispatches of `p` with `variant` (one of `variants(p, caps)`, default the first): the one
    launch of `plan_matmul`, or for a split-K variant its slices into scratch "partials" and the
    combine pass (roles params, "partials", "out", "bias", "residual")."""
    names = variants(p, caps)
    variant = variant or (names[0] if names else None)
    spec = VARIANTS.get((variant or "").removesuffix(VEC_SUFFIX))
    if not (isinstance(spec, TiledSpec) and spec.splits > 1 and variant in names):
        return MatmulPlan((plan_matmul(p, caps, variant),), {})
    assert variant is not None
    p = p.normalized()
    if p.activation not in ACTIVATIONS:
        raise ValueError(f"matmul epilogue: unknown activation {p.activation!r} "
                         f"({sorted(map(str, ACTIVATIONS))})")
    vec = variant.endswith(VEC_SUFFIX)
    a_mode, b_mode = _tiled_modes(p)
    if not vec:
        a_mode = {"k": "sk", "i": "si"}.get(a_mode, a_mode)
        b_mode = {"k": "sk", "i": "si"}.get(b_mode, b_mode)
    count = spec.splits
    epi = wgsl.Epilogue(p.dtype, p.bias is not None, p.residual is not None, p.activation)
    src = wgsl.tiled_source(epi, spec.bm, spec.bn, spec.bk, spec.tm, spec.tn, a_mode, b_mode, spec.lds4,
                            splits=count, double=spec.double)
    chunk = ceil_div(ceil_div(p.k, spec.bk), count) * spec.bk    # whole K tiles per slice
    params = _params(p) + (chunk, count, 0, 0)   # the params struct's `sk`
    grid = (ceil_div(p.n, spec.bn), ceil_div(p.m, spec.bm), p.batch * count)
    _check(p, caps, grid)
    first = KernelLaunch(name=f"matmul.{p.dtype}.{variant}", wgsl=src, grid=grid,
                         workgroup_size=(spec.bn // spec.tn, spec.bm // spec.tm, 1),
                         bindings=(PARAMS, "a", "b", "partials"), params=params, read_only=frozenset({1, 2}))
    roles = [PARAMS, "partials", "out"] + (["bias"] if p.bias else []) + (["residual"] if p.residual else [])
    total = p.batch * p.m * p.n
    groups = grid_within(ceil_div(total, COMBINE_THREADS), caps.limit("max-compute-workgroups-per-dimension",
                                                                      65535))
    combine = KernelLaunch(name=f"matmul.{p.dtype}.splitk{count}.combine",
                           wgsl=wgsl.combine_source(epi, count, COMBINE_THREADS), grid=(*groups, 1),
                           workgroup_size=(COMBINE_THREADS, 1, 1), bindings=tuple(roles), params=params,
                           read_only=frozenset(i for i, r in enumerate(roles) if r not in ("out", PARAMS)))
    return MatmulPlan((first, combine), {"partials": 4 * count * total})


def record_matmul(plan: MatmulPlan, operands: Mapping, rt=None, dispatch=None) -> None:
    """Record the plan's dispatches with `operands[role]` (buffer id or BufferSlice; the scratch roles
    of `plan.scratch` included)."""
    for launch in plan.steps:
        record(launch, operands, rt, dispatch)


@dataclass(frozen=True)
class Piece:
    """One launch of a split problem: offsets are relative to each role's byte window (None: the whole
    buffer, the problem unchanged)."""

    problem: MatmulProblem
    windows: dict[str, tuple[int, int]] | None


def _roles(p: MatmulProblem) -> dict[str, tuple[Layout, int, int]]:
    roles = {"a": (p.a, p.m, p.k), "b": (p.b, p.k, p.n), "out": (p.out, p.m, p.n)}
    if p.bias:
        roles["bias"] = (p.bias, p.m, p.n)
    if p.residual:
        roles["residual"] = (p.residual, p.m, p.n)
    return roles


def _span(p: MatmulProblem, lay: Layout, rows: int, cols: int) -> tuple[int, int]:
    hi = (lay.offset + (p.batch - 1) * lay.batch_stride + (rows - 1) * lay.row_stride
          + (cols - 1) * lay.col_stride)
    return lay.offset, hi + 1


def _shift(lay: Layout | None, by: int) -> Layout | None:
    return None if lay is None else replace(lay, offset=lay.offset + by)


def split_for_binding(p: MatmulProblem, itemsize: int, max_binding: int, align: int = 256,
                      max_workgroups: int = 65535,
                      buffer_bytes: Mapping[str, int] | None = None) -> list[Piece]:
    """`p` as launches whose operands each fit one binding of `max_binding` bytes (windows start at
    multiples of `align`) and whose grids fit `max_workgroups`: split along batch, then M, then N.
    `buffer_bytes[role]`: the size of each whole buffer (a piece binds whole buffers when all fit)."""
    spans = {r: _span(p, *v) for r, v in _roles(p).items()}
    too_big = {r for r, (lo, hi) in spans.items() if hi * itemsize - (lo * itemsize // align) * align
               > max_binding}
    grid_ok = p.batch <= max_workgroups and max(p.m, p.n) <= 16 * max_workgroups
    if not too_big and grid_ok:
        whole = all((buffer_bytes[r] if buffer_bytes else hi * itemsize) <= max_binding
                    for r, (_, hi) in spans.items())
        if whole:
            return [Piece(p, None)]
        windows, rebased = {}, {}
        for role, (lo, hi) in spans.items():
            start = (lo * itemsize // align) * align
            windows[role] = (start, -(-(hi * itemsize - start) // 4) * 4)
            rebased[role] = -(start // itemsize)
        q = replace(p, a=_shift(p.a, rebased["a"]), b=_shift(p.b, rebased["b"]),
                    out=_shift(p.out, rebased["out"]), bias=_shift(p.bias, rebased.get("bias", 0)),
                    residual=_shift(p.residual, rebased.get("residual", 0)))
        return [Piece(q, windows)]
    rows_big = bool(too_big & {"a", "out", "bias", "residual"}) or p.m > 16 * max_workgroups
    if p.batch > 1:
        h = p.batch // 2
        parts = [(replace(p, batch=h), 0), (replace(p, batch=p.batch - h), h)]
        return [piece for q, b0 in parts for piece in split_for_binding(
            replace(q, a=_shift(q.a, b0 * p.a.batch_stride), b=_shift(q.b, b0 * p.b.batch_stride),
                    out=_shift(q.out, b0 * p.out.batch_stride),
                    bias=_shift(q.bias, b0 * p.bias.batch_stride) if p.bias else None,
                    residual=_shift(q.residual, b0 * p.residual.batch_stride) if p.residual else None),
            itemsize, max_binding, align, max_workgroups, buffer_bytes)]
    if p.m > 1 and (rows_big or p.n == 1):
        h = p.m // 2
        out: list[Piece] = []
        for m0, m in ((0, h), (h, p.m - h)):
            q = replace(p, m=m, a=_shift(p.a, m0 * p.a.row_stride), out=_shift(p.out, m0 * p.out.row_stride),
                        bias=_shift(p.bias, m0 * p.bias.row_stride) if p.bias else None,
                        residual=_shift(p.residual, m0 * p.residual.row_stride) if p.residual else None)
            out += split_for_binding(q, itemsize, max_binding, align, max_workgroups, buffer_bytes)
        return out
    if p.n > 1:
        h = p.n // 2
        out = []
        for n0, n in ((0, h), (h, p.n - h)):
            q = replace(p, n=n, b=_shift(p.b, n0 * p.b.col_stride), out=_shift(p.out, n0 * p.out.col_stride),
                        bias=_shift(p.bias, n0 * p.bias.col_stride) if p.bias else None,
                        residual=_shift(p.residual, n0 * p.residual.col_stride) if p.residual else None)
            out += split_for_binding(q, itemsize, max_binding, align, max_workgroups, buffer_bytes)
        return out
    raise ValueError(f"matmul: operand(s) {sorted(too_big)} of a {p.m}x{p.n}x{p.k} piece exceed the device's "
                     f"storage binding limit ({max_binding} bytes) and splitting along batch/M/N cannot "
                     "shrink them (one K-row of A, or B stored [K, N] for one batch, must fit one binding)")


# Sibling linears that read the same input (q/k/v, gate/up) as ONE dispatch: at most this many products
GROUPED_MAX = 3


@dataclass(frozen=True)
class GroupedProblems:
    """Sibling products of one A in one dispatch: what the dense and the quantized grouped gemv share."""

    problems: tuple
    glu: bool = False   # one output act0(x W0^T) * (x W1^T) (an MLP's gate/up), at problem 0's layout

    @property
    def dtype(self) -> str:
        """The storage type of the outputs (and of A)."""
        return self.problems[0].dtype

    @property
    def flops(self) -> int:
        """The problems' FLOPs together."""
        return sum(p.flops for p in self.problems)

    def shape_class(self) -> str:
        """A coarse key for autotuning: the group size and each problem's class."""
        return f"g{len(self.problems)}{'glu' if self.glu else ''}:" + ",".join(
            p.shape_class() for p in self.problems)


@dataclass(frozen=True)
class GroupedGemvProblem(GroupedProblems):
    """Several matrix-vector products of the same A (M <= GEMV_MAX_ROWS rows, batch 1) with their own
    K-contiguous weights, written to one output buffer at each problem's `out` layout. Every problem
    has A's m, k, layout and dtype; no bias or residual (alpha and the activation are per problem)."""

    problems: tuple[MatmulProblem, ...]

    def layout_class(self) -> str:
        """The first problem's layout class (all read the same A)."""
        return self.problems[0].layout_class()

    def check(self) -> None:
        """ValueError naming what the grouped kernel cannot run."""
        ps = [p.normalized() for p in self.problems]
        first = ps[0]
        if not 2 <= len(ps) <= GROUPED_MAX:
            raise ValueError(f"grouped gemv: 2 to {GROUPED_MAX} problems, got {len(ps)}")
        for p in ps:
            if p.batch != 1 or p.m > GEMV_MAX_ROWS or p.bias or p.residual:
                raise ValueError("grouped gemv: batch 1, at most "
                                 f"{GEMV_MAX_ROWS} rows, no bias or residual (got {p})")
            if (p.m, p.k, p.a, p.dtype) != (first.m, first.k, first.a, first.dtype):
                raise ValueError("grouped gemv: every problem reads the same A (m, k, layout, dtype)")
            if p.b.row_stride != 1 or p.activation not in ACTIVATIONS:
                raise ValueError("grouped gemv: weights contiguous along K ([N, K] linear weights)")
        if self.glu and (len(ps) != 2 or ps[1].n != first.n or ps[1].activation is not None):
            raise ValueError("grouped gemv: the GLU form takes two problems of one N (no activation on the "
                             "second)")


def grouped_variants(gp: GroupedGemvProblem, caps: DeviceCaps) -> list[str]:
    """The streaming gemv variants that can run every problem of `gp` as one dispatch on `caps`, best
    default first ([] when none can: the bindings exceed the device's storage buffers per stage)."""
    try:
        gp.check()
    except ValueError:
        return []
    if len(gp.problems) + 2 > caps.limit("max-storage-buffers-per-shader-stage", 8):
        return []
    if gp.dtype not in ("f32", "f16") or (gp.dtype == "f16" and not caps.shader_f16):
        return []
    per = [_stream_variants(p.normalized(), caps, True) for p in gp.problems]
    limit = caps.limit("max-compute-workgroups-per-dimension", 65535)
    names = []
    problems = gp.problems[:1] if gp.glu else gp.problems   # the GLU form's grid is one problem's
    for name in per[0]:
        ln = VARIANTS[name.removesuffix(VEC_SUFFIX)].ln
        if all(name in other for other in per[1:]) and sum(ceil_div(p.n, ln) for p in problems) <= limit:
            names.append(name)
    return names


def plan_grouped_matmul(gp: GroupedGemvProblem, caps: DeviceCaps, variant: str | None = None) -> KernelLaunch:
    """The one launch of every product of `gp` (bindings: a, b0, b1, ..., out)."""
    gp.check()
    names = grouped_variants(gp, caps)
    if not names:
        raise TypeError(f"grouped gemv of {len(gp.problems)} {gp.dtype} products: no variant on this device "
                        "(storage buffers per stage, shader-f16 or the layouts); run them one by one")
    variant = variant or names[0]
    if variant not in names:
        raise ValueError(f"grouped gemv variant {variant!r} is not one of {names}")
    spec = VARIANTS[variant.removesuffix(VEC_SUFFIX)]
    assert isinstance(spec, GemvSpec) and spec.unroll and spec.k_fast
    ps = [p.normalized() for p in gp.problems]
    first = ps[0]
    mr = 1 << max(0, (first.m - 1).bit_length())
    vw = stream_width(first, True) if variant.endswith(VEC_SUFFIX) else 1
    sg = _sg_size(caps) if spec.subgroup else None
    epi = wgsl.Epilogue(first.dtype, False, False, None)
    src = wgsl.gemv_stream_k_source(epi, spec.lk, spec.ln, spec.unroll, mr, vw, sg,
                                    grouped=tuple(p.activation for p in ps), glu=gp.glu)
    params = [first.m, 0, first.k, 1] + first.a.words()
    start = 0
    for p in ps:
        params += p.b.words() + p.out.words() + [start, p.n, f32_word(p.alpha), 0]
        start += ceil_div(p.n, spec.ln)
    if gp.glu:
        start = ceil_div(first.n, spec.ln)
    grid = (start, ceil_div(first.m, mr), 1)
    bindings = (PARAMS, "a", *(f"b{i}" for i in range(len(ps))), "out")
    kind = f"gmatmul{len(ps)}{'glu' if gp.glu else ''}"
    return KernelLaunch(name=f"{kind}.{first.dtype}.{variant}", wgsl=src, grid=grid,
                        workgroup_size=(spec.threads, 1, 1), bindings=bindings, params=tuple(params),
                        read_only=frozenset(range(1, len(bindings) - 1)))
