"""The matmul family's variants: specs that own their name, their WGSL and their grid.

A variant is a spec (`TiledSpec`, `GemvSpec`, `SgmatSpec`: the parameters of one of matmul_wgsl.py's or
sgmat_wgsl.py's templates) and whether it loads its operands as vectors (`VEC_SUFFIX`, where the layouts
allow). Its name is derived from the spec and parses back (`parse_variant`):

    tiled  tile{BM}x{BN}.r{TM}x{TN}.k{BK}  BM x BN outputs a workgroup, TM x TN an invocation, BK-deep K
           tiles, then where set: .l4 (groups of 4 outputs, vec4 reads of the K tiles), .db (two K-tile
           buffers), .pl / .pl{D} (K tiles fetched D ahead into registers), .g{N} (tiles launched N rows at
           a time down each column), .ar (A tile kept [i][k]), .ap (padded [k][i] A lines), .bv (B stored
           in whole vec4s), .o4 (4 adjacent outputs stored at once), .s{S} (split-K: S slices, then a
           combine pass)
    gemv   gemv.k{LK}n{LN} (LK lanes along K per column, LN columns) or gemv.n{LN}k{LK} (LN invocations
           along N, LK K slices), then .u{U} (the streaming form, U loads in flight a lane), .sg (lanes
           combined through subgroups; the unstreamed forms say .wg for a workgroup tree)
    sgmat  sgmat.w{SM}x{SN}.f{FM}x{FN}.k{BK}  SM x SN subgroups, each FM x FN 16x16 results, BK-deep f16 K
           tiles, then where set: .db, .pl / .pl{D}, .g{N}, .rot (staging stores rotated), .dn / .pr
           (staging units down 8 lines / in pairs of lines), .bp (B's stores plain), .cs{R} (results in R
           turns), .o4, .p16 (K tiles of 16-byte words), .pp (results ping-pong), .pad{P} (rows padded
           by P halves, not 8)
    and .v4 after any of them: the vector-load form.

The catalogue is a short shipping list per (dtype, capability) — every variant that the autotuner can
time, or a compiled plan carry, for some problem on some device (the first `autotune.MAX_CANDIDATES` that
`matmul.variants` offers) — beside an experimental set that only benchmarks register
(`register_experimental`). What each variant measured, and why the experimental ones stay, is in
benchmarks/results/README.md.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from . import matmul_wgsl as wgsl
from . import sgmat_wgsl
from .launch import PARAMS, DeviceCaps, KernelLaunch, LaunchPlan, ceil_div, f32_word, grid_within

GEMV_MAX_ROWS = 4      # M at or below this (or N, transposed) runs as matrix-vector
VEC_SUFFIX = ".v4"     # the vector-load form of a variant
COMBINE_THREADS = 256  # invocations a workgroup of a split-K combine pass


# ---- what a device and a layout allow ---------------------------------------------------------------

def subgroup_size(caps: DeviceCaps) -> int | None:
    """The device's fixed subgroup size, or None."""
    if caps.subgroup_size:
        return caps.subgroup_size
    lo, hi = caps.limits.get("subgroup-min-size"), caps.limits.get("subgroup-max-size")
    return int(lo) if lo and lo == hi else None


def tensor_core_subgroup_size(caps: DeviceCaps) -> int | None:
    """The subgroup size the f16 tensor-core (sgmat) variants run with on `caps`, or None where they
    cannot (no f16x16x16 -> f32 subgroup matrices, or no fixed subgroup size dividing 256)."""
    sg = subgroup_size(caps)
    ok = (caps.shader_f16 and caps.subgroup_matrix and sg and 256 % sg == 0
          and ("f16", "f32", 16, 16, 16) in caps.subgroup_matrix_configs)
    return sg if ok else None


def fits(caps: DeviceCaps, threads: int, nbytes: int) -> bool:
    """A workgroup of `threads` invocations and `nbytes` of workgroup memory fits the device."""
    return (threads <= caps.limit("max-compute-invocations-per-workgroup", 256)
            and nbytes <= caps.limit("max-compute-workgroup-storage-size", 16384))


def tiled_modes(p: Any) -> tuple[str, str]:
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


def vec8_axis(lay: Any, rows: int, cols: int) -> str:
    """The axis ("cols", "rows") along which an f16 operand can be staged 8 elements (16 bytes) at a
    time: stride 1 there, its extent, the offset and the other strides multiples of 8; else ""."""
    for axis, unit, extent, other in (("cols", lay.col_stride, cols, lay.row_stride),
                                      ("rows", lay.row_stride, rows, lay.col_stride)):
        if unit == 1 and extent % 8 == 0 and all(x % 8 == 0 for x in (lay.offset, other, lay.batch_stride)):
            return axis
    return ""


def gemv_problem(p: Any) -> Any:
    """The orientation in which the gemv kernels run `p` (few rows), or None."""
    if p.m <= GEMV_MAX_ROWS:
        return p
    if p.n <= GEMV_MAX_ROWS:
        return p.transposed()
    return None


def gemv_vec(g: Any) -> bool:
    """The unstreamed gemv's vec4 form applies to the gemv-oriented `g`."""
    return g.a.vec4_along("col", g.k) and g.b.vec4_along("row", g.k)


def _along(lay: Any, axis: str, extent: int, width: int) -> bool:
    """Whole `width`-element vectors along `axis` ("row"/"col", stride 1 there, `extent` elements)."""
    unit, other = (lay.col_stride, lay.row_stride) if axis == "col" else (lay.row_stride, lay.col_stride)
    return unit == 1 and all(x % width == 0 for x in (extent, lay.offset, other, lay.batch_stride))


def stream_width(g: Any, k_fast: bool) -> int:
    """Elements per 16-byte load of the streaming gemv on the gemv-oriented `g` (8 halves, 4 floats),
    or 1 when its layouts do not allow vector loads."""
    vw = 8 if g.dtype == "f16" else 4
    if k_fast:
        ok = _along(g.a, "col", g.k, vw) and _along(g.b, "row", g.k, vw)
    else:
        ok = _along(g.b, "col", g.n, vw)
    return vw if ok else 1


def params_words(p: Any) -> tuple[int, ...]:
    """The Params struct of matmul_wgsl's templates for problem `p`."""
    zero = [0, 0, 0, 0]
    return tuple([p.m, p.n, p.k, p.batch] + p.a.words() + p.b.words() + p.out.words()
                 + (p.bias.words() if p.bias else zero) + (p.residual.words() if p.residual else zero)
                 + [f32_word(p.alpha), f32_word(p.beta), 0, 0])


def check_grid(p: Any, caps: DeviceCaps, grid: tuple[int, int, int]) -> None:
    """ValueError when `grid` exceeds the device's workgroups per dimension."""
    limit = caps.limit("max-compute-workgroups-per-dimension", 65535)
    if max(grid) > limit:
        raise ValueError(f"matmul {p.batch}x{p.m}x{p.n}x{p.k}: grid {grid} exceeds the device's "
                         f"{limit} workgroups per dimension; split the problem along batch/M/N")


def _epilogue(p: Any) -> wgsl.Epilogue:
    return wgsl.Epilogue(p.dtype, p.bias is not None, p.residual is not None, p.activation)


def _launch(name: str, p: Any, run: Any, caps: DeviceCaps, src: str, grid: tuple[int, int, int],
            workgroup_size: tuple[int, int, int]) -> KernelLaunch:
    """The one launch of a single-pass variant running `p` as `run` (`p` itself, or transposed)."""
    check_grid(run, caps, grid)
    bindings = [PARAMS, "a", "b", "out"] + (["bias"] if p.bias else []) + (["residual"] if p.residual else [])
    if run is not p:  # transposed: A' is B and B' is A
        bindings[1], bindings[2] = "b", "a"
    read_only = frozenset(i for i, r in enumerate(bindings) if r not in ("out", PARAMS))
    return KernelLaunch(name=f"matmul.{p.dtype}.{name}", wgsl=src, grid=grid, workgroup_size=workgroup_size,
                        bindings=tuple(bindings), params=params_words(run), read_only=read_only)


# ---- names -------------------------------------------------------------------------------------------

# A name part after the head: (regex, field, value): the value is the regex's number where it has one
# (pipelined: 1 when it has none), else `value`. Parts come in this order, each field at most once.
Part = tuple[str, str, Any]


def _name_parts(spec: Any, table: tuple[Part, ...]) -> str:
    """The name parts of `spec`'s fields that are not at their defaults, in `table`'s order."""
    out = []
    for regex, field, value in table:
        got, default = getattr(spec, field), _DEFAULTS[type(spec)][field]
        if got == default or (value is not None and got != value):
            continue
        text = regex.split("(")[0]
        if value is None:   # a number: pipelined's 1 is written without it
            text += "" if (field == "pipelined" and got == 1) else str(int(got))
        out.append("." + text)
    return "".join(out)


def _parse_parts(parts: list[str], table: tuple[Part, ...], name: str) -> dict[str, Any]:
    """Fields from the name parts after the head (`_name_parts` read back)."""
    out: dict[str, Any] = {}
    for part in parts:
        for regex, field, value in table:
            m = re.fullmatch(regex, part)
            if m and field not in out:
                out[field] = value if value is not None else int(m.group(1) or 1)
                break
        else:
            raise ValueError(f"matmul variant {name!r}: unknown or repeated part {part!r}")
    return out


@dataclass(frozen=True)
class TiledSpec:
    """Register-tiled SIMT: a bm × bn tile per workgroup, tm × tn outputs per invocation, bk-deep K tiles
    (matmul_wgsl.tiled_source)."""

    kind: ClassVar[str] = "tiled"
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
    a_rows: bool = False  # a K-contiguous A's tile kept [i][k], both tiles stored in whole vec4s
    a_pad: bool = False   # [k][i] A tile of padded lines: its stores off each other's banks
    out_vec: bool = False  # each group of 4 adjacent outputs stored at once (rows 4-aligned only)
    vec_stores: bool = False  # an N-contiguous B's units stored in whole vec4s

    PARTS: ClassVar[tuple[Part, ...]] = (
        (r"l4", "lds4", True), (r"db", "double", True), (r"pl(\d*)", "pipelined", None),
        (r"g(\d+)", "group", None), (r"ar", "a_rows", True), (r"ap", "a_pad", True),
        (r"bv", "vec_stores", True), (r"o4", "out_vec", True), (r"s(\d+)", "splits", None))

    @property
    def name(self) -> str:
        """The variant's name (module docstring)."""
        return f"tile{self.bm}x{self.bn}.r{self.tm}x{self.tn}.k{self.bk}" + _name_parts(self, self.PARTS)

    @classmethod
    def parse(cls, name: str) -> TiledSpec:
        """The spec of `name` (ValueError when it is not a tiled variant's name)."""
        m = re.fullmatch(r"tile(\d+)x(\d+)\.r(\d+)x(\d+)\.k(\d+)((?:\.[a-z0-9]+)*)", name)
        if not m:
            raise ValueError(f"matmul variant {name!r}: not tile<BM>x<BN>.r<TM>x<TN>.k<BK>...")
        bm, bn, tm, tn, bk = (int(x) for x in m.groups()[:5])
        flags = _parse_parts(m.group(6).split(".")[1:], cls.PARTS, name)
        return _round_trip(cls(bm, bn, bk, tm, tn, **flags), name)

    @property
    def threads(self) -> int:
        """Invocations per workgroup."""
        return (self.bm // self.tm) * (self.bn // self.tn)

    def workgroup_bytes(self, dtype: str) -> int:
        """Workgroup memory of the K tiles (kept in f32)."""
        a_row = self.bk + (wgsl.ROWS_PAD if self.a_rows else 0)
        a_lines = wgsl.LINE_PAD * self.bk if self.a_pad else 0
        return 4 * (self.bm * a_row + a_lines + self.bn * self.bk) * (2 if self.double else 1)

    def modes(self, p: Any, vec: bool) -> tuple[str, str]:
        """The load forms of A and B (tiled_modes; the scalar orders without `vec`)."""
        a_mode, b_mode = tiled_modes(p)
        if not vec:
            a_mode = {"k": "sk", "i": "si"}.get(a_mode, a_mode)
            b_mode = {"k": "sk", "i": "si"}.get(b_mode, b_mode)
        return a_mode, b_mode

    def plan(self, p: Any, caps: DeviceCaps, vec: bool) -> LaunchPlan:
        """The launch (split-K: the slices into scratch "partials", then the combine pass) of `p`."""
        name = self.name + (VEC_SUFFIX if vec else "")
        a_mode, b_mode = self.modes(p, vec)
        epi = _epilogue(p)
        if self.splits == 1:
            src = wgsl.tiled_source(epi, self, a_mode, b_mode)
            grid = (ceil_div(p.n, self.bn), ceil_div(p.m, self.bm), p.batch)
            workgroup = (self.bn // self.tn, self.bm // self.tm, 1)
            return LaunchPlan((_launch(name, p, p, caps, src, grid, workgroup),))
        count = self.splits
        src = wgsl.tiled_source(epi, self, a_mode, b_mode)
        chunk = ceil_div(ceil_div(p.k, self.bk), count) * self.bk    # whole K tiles per slice
        params = params_words(p) + (chunk, count, 0, 0)   # the params struct's `sk`
        grid = (ceil_div(p.n, self.bn), ceil_div(p.m, self.bm), p.batch * count)
        check_grid(p, caps, grid)
        first = KernelLaunch(name=f"matmul.{p.dtype}.{name}", wgsl=src, grid=grid,
                             workgroup_size=(self.bn // self.tn, self.bm // self.tm, 1),
                             bindings=(PARAMS, "a", "b", "partials"), params=params,
                             read_only=frozenset({1, 2}))
        roles = [PARAMS, "partials", "out"] + (["bias"] if p.bias else []) + (
            ["residual"] if p.residual else [])
        total = p.batch * p.m * p.n
        groups = grid_within(ceil_div(total, COMBINE_THREADS),
                             caps.limit("max-compute-workgroups-per-dimension", 65535))
        combine = KernelLaunch(name=f"matmul.{p.dtype}.splitk{count}.combine",
                               wgsl=wgsl.combine_source(epi, count, COMBINE_THREADS), grid=(*groups, 1),
                               workgroup_size=(COMBINE_THREADS, 1, 1), bindings=tuple(roles), params=params,
                               read_only=frozenset(i for i, r in enumerate(roles)
                                                   if r not in ("out", PARAMS)))
        return LaunchPlan((first, combine), {"partials": 4 * count * total})


@dataclass(frozen=True)
class GemvSpec:
    """Few rows: `ln` columns per workgroup, `lk` invocations splitting K; `subgroup` reduces with
    subgroupAdd (k-contiguous B only). `unroll` > 0: the streaming form (gemv_stream_*_source) built
    for memory bandwidth, with `unroll` independent loads in flight per invocation; its ".v4" form loads
    16 bytes at a time (8 halves or 4 floats). k_fast: `lk` lanes per output column walk K (lanes
    combined by subgroup shuffles/adds or a workgroup tree); else each invocation owns 16 bytes of
    consecutive columns, `ln` of them along N and `lk` K slices (workgroup tree)."""

    kind: ClassVar[str] = "gemv"
    lk: int
    ln: int
    k_fast: bool
    subgroup: bool = False
    unroll: int = 0

    @property
    def name(self) -> str:
        """The variant's name (module docstring)."""
        head = f"gemv.k{self.lk}n{self.ln}" if self.k_fast else f"gemv.n{self.ln}k{self.lk}"
        unroll = f".u{self.unroll}" if self.unroll else ""
        return head + unroll + (".sg" if self.subgroup else "" if self.unroll else ".wg")

    @classmethod
    def parse(cls, name: str) -> GemvSpec:
        """The spec of `name` (ValueError when it is not a gemv variant's name)."""
        m = re.fullmatch(r"gemv\.(?:k(\d+)n(\d+)|n(\d+)k(\d+))(?:\.u(\d+))?(?:\.(sg|wg))?", name)
        if not m:
            raise ValueError(f"matmul variant {name!r}: not gemv.k<LK>n<LN> or gemv.n<LN>k<LK>, then "
                             "[.u<U>][.sg|.wg]")
        k_fast = m.group(1) is not None
        lk, ln = (int(m.group(1)), int(m.group(2))) if k_fast else (int(m.group(4)), int(m.group(3)))
        spec = cls(lk, ln, k_fast, m.group(6) == "sg", int(m.group(5) or 0))
        return _round_trip(spec, name)

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

    def plan(self, p: Any, caps: DeviceCaps, vec: bool) -> LaunchPlan:
        """The launch of `p`, run in its gemv orientation (transposed when N is the short side)."""
        run = gemv_problem(p)
        epi = _epilogue(p)
        mr = 1 << max(0, (min(run.m, GEMV_MAX_ROWS) - 1).bit_length())
        sg = subgroup_size(caps) if self.subgroup else None
        if not self.unroll:
            src = wgsl.gemv_source(epi, self.lk, self.ln, mr, vec, self.k_fast, sg)
            grid = (ceil_div(run.n, self.ln), ceil_div(run.m, mr), p.batch)
            wg = (self.lk, self.ln, 1) if self.k_fast else (self.ln, self.lk, 1)
        elif self.k_fast:
            vw = stream_width(run, True) if vec else 1
            src = wgsl.gemv_stream_k_source(epi, self.lk, self.ln, self.unroll, mr, vw, sg)
            grid, wg = (ceil_div(run.n, self.ln), ceil_div(run.m, mr), p.batch), (self.threads, 1, 1)
        else:
            vw = stream_width(run, False) if vec else 1
            src = wgsl.gemv_stream_n_source(epi, self.ln, self.lk, self.unroll, mr, vw)
            grid, wg = (ceil_div(run.n, self.ln * vw), ceil_div(run.m, mr), p.batch), (self.threads, 1, 1)
        return LaunchPlan((_launch(self.name + (VEC_SUFFIX if vec else ""), p, run, caps, src, grid, wg),))


@dataclass(frozen=True)
class SgmatSpec:
    """Tensor cores: sg_m × sg_n subgroups, each fm × fn 16×16 result matrices, bk-deep f16 K tiles
    (sgmat_wgsl.sgmat_source, which reads these fields)."""

    kind: ClassVar[str] = "sgmat"
    sg_m: int
    sg_n: int
    fm: int
    fn: int
    bk: int = 32
    pad: int = sgmat_wgsl.SGMAT_ROW_PAD   # f16 elements of padding per workgroup-tile row (bank conflicts)
    group: int = 0       # tiles launched `group` rows at a time down each column (matmul_wgsl.tile_origin)
    pipelined: int = 0   # K tiles loaded ahead, during the multiplies (sgmat_wgsl.sgmat_main's next_tiles)
    rotate: bool = False   # staging stores rotated per invocation against bank conflicts
    double: bool = False   # two K-tile buffers, one barrier per K tile
    order: str = ""        # staging units "down" 8 lines at a time or in "pairs" of lines 4 apart
    plain_b: bool = False  # with `rotate`, B's stores unrotated: whole 16-byte stores along its rows
    results_rounds: int = 1   # results through a scratch this fraction the size, in turns
    out_vec: bool = False  # results stored 4 adjacent columns a lane (rows 4-aligned only)
    packed: bool = False   # K tiles of 16-byte words, one store a unit, results through them
    pingpong: bool = False  # packed: results alternate between the K tiles and a scratch

    PARTS: ClassVar[tuple[Part, ...]] = (
        (r"db", "double", True), (r"pl(\d*)", "pipelined", None), (r"g(\d+)", "group", None),
        (r"rot", "rotate", True), (r"dn", "order", "down"), (r"pr", "order", "pairs"),
        (r"bp", "plain_b", True),
        (r"cs(\d+)", "results_rounds", None), (r"o4", "out_vec", True), (r"p16", "packed", True),
        (r"pp", "pingpong", True), (r"pad(\d+)", "pad", None))

    @property
    def name(self) -> str:
        """The variant's name (module docstring)."""
        return (f"sgmat.w{self.sg_m}x{self.sg_n}.f{self.fm}x{self.fn}.k{self.bk}"
                + _name_parts(self, self.PARTS))

    @classmethod
    def parse(cls, name: str) -> SgmatSpec:
        """The spec of `name` (ValueError when it is not an sgmat variant's name)."""
        m = re.fullmatch(r"sgmat\.w(\d+)x(\d+)\.f(\d+)x(\d+)\.k(\d+)((?:\.[a-z0-9]+)*)", name)
        if not m:
            raise ValueError(f"matmul variant {name!r}: not sgmat.w<SM>x<SN>.f<FM>x<FN>.k<BK>...")
        flags = _parse_parts(m.group(6).split(".")[1:], cls.PARTS, name)
        return _round_trip(cls(*(int(x) for x in m.groups()[:5]), **flags), name)

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

    def plan(self, p: Any, caps: DeviceCaps, vec: bool) -> LaunchPlan:
        """The launch of `p` on the tensor cores."""
        sg = subgroup_size(caps)
        assert sg is not None
        vec_a, vec_b = vec8_axis(p.a, p.m, p.k), vec8_axis(p.b, p.k, p.n)
        src = sgmat_wgsl.sgmat_source(_epilogue(p), self, sg, vec_a, vec_b)
        bm, bn = self.tile
        grid = (ceil_div(p.n, bn), ceil_div(p.m, bm), p.batch)
        name = self.name + (VEC_SUFFIX if vec else "")
        return LaunchPlan((_launch(name, p, p, caps, src, grid, (self.sg_m * self.sg_n * sg, 1, 1)),))


Spec = TiledSpec | GemvSpec | SgmatSpec
_KINDS: dict[str, type] = {"tile": TiledSpec, "gemv": GemvSpec, "sgmat": SgmatSpec}
_DEFAULTS: dict[type, dict[str, Any]] = {cls: {f.name: f.default for f in fields(cls)}
                                         for cls in (TiledSpec, SgmatSpec)}


def _round_trip(spec: Any, name: str) -> Any:
    """`spec`, when it names itself `name` (one spelling per spec: defaults left out, parts in order)."""
    if spec.name != name:
        raise ValueError(f"matmul variant {name!r}: its spec is named {spec.name!r}")
    return spec


@dataclass(frozen=True)
class Variant:
    """A spec and whether it loads its operands as vectors (VEC_SUFFIX)."""

    spec: Spec
    vec: bool = False

    @property
    def name(self) -> str:
        """The variant's name."""
        return self.spec.name + (VEC_SUFFIX if self.vec else "")


def parse_variant(name: str) -> Variant:
    """The variant a name stands for (ValueError naming what is wrong with it)."""
    vec = name.endswith(VEC_SUFFIX)
    base = name.removesuffix(VEC_SUFFIX)
    kind = _KINDS.get(re.match(r"[a-z]*", base).group(0))
    if kind is None:
        raise ValueError(f"matmul variant {name!r}: names start with tile, gemv or sgmat")
    return Variant(kind.parse(base), vec)


def spec_fields(spec: Spec) -> dict[str, Any]:
    """The fields of a spec (for messages and tests)."""
    return {f.name: getattr(spec, f.name) for f in fields(spec)}

# ---- the catalogue -----------------------------------------------------------------------------------

# The shipping variants per (storage dtypes, capability), each list in the order `matmul.variants` falls
# back on where a problem's preferred ones do not fit the device: every variant that can be among the
# first autotune.MAX_CANDIDATES it offers for some problem on some device whose limits are WebGPU's
# defaults or more (tests/kernels/test_matmul_variants.py checks that registering the experimental ones
# changes none of them).
SHIPPING: dict[tuple[str, str], tuple[Spec, ...]] = {
    # register-tiled SIMT, any device
    ("f32 f16", "simt"): (
        TiledSpec(128, 128, 16, 8, 8),
        TiledSpec(128, 64, 16, 8, 4, lds4=True),
        TiledSpec(64, 64, 16, 4, 4, lds4=True),
        TiledSpec(128, 64, 16, 8, 4),
        TiledSpec(64, 64, 16, 4, 4),
        TiledSpec(64, 64, 32, 4, 4),
        TiledSpec(32, 64, 32, 2, 4),
        TiledSpec(16, 64, 32, 1, 4),
        TiledSpec(32, 32, 16, 2, 2),
        TiledSpec(128, 128, 8, 8, 8, lds4=True, double=True),
        TiledSpec(128, 64, 16, 8, 4, lds4=True, double=True),
        TiledSpec(64, 64, 16, 4, 4, lds4=True, double=True),
        TiledSpec(128, 128, 8, 8, 8, lds4=True, pipelined=1),
        TiledSpec(128, 128, 8, 8, 8, lds4=True, pipelined=1, a_pad=True),
        TiledSpec(128, 128, 8, 8, 16, lds4=True, double=True, a_pad=True),
        TiledSpec(128, 128, 8, 8, 16, lds4=True, double=True, group=8, a_pad=True),
        TiledSpec(128, 128, 8, 8, 16, lds4=True, double=True, group=4, a_pad=True),
        TiledSpec(128, 128, 8, 8, 16, lds4=True, double=True, a_pad=True, vec_stores=True),
        TiledSpec(128, 128, 8, 8, 16, lds4=True, double=True, group=8, a_pad=True, vec_stores=True),
        TiledSpec(128, 128, 8, 8, 16, lds4=True, double=True, vec_stores=True),
    ),
    # few rows (or columns): split-K and streaming matrix-vector, the ".sg" forms with a fixed subgroup size
    ("f32 f16", "gemv"): (
        GemvSpec(64, 4, True, subgroup=True),
        GemvSpec(64, 4, True),
        GemvSpec(32, 8, True),
        GemvSpec(16, 16, False),
        GemvSpec(4, 64, False),
        GemvSpec(8, 16, True, subgroup=True, unroll=4),
        GemvSpec(16, 8, True, subgroup=True, unroll=4),
        GemvSpec(32, 4, True, subgroup=True, unroll=4),
        GemvSpec(64, 2, True, subgroup=True, unroll=4),
        GemvSpec(8, 16, True, unroll=4),
        GemvSpec(16, 8, True, unroll=4),
        GemvSpec(32, 4, True, unroll=4),
        GemvSpec(64, 2, True, unroll=4),
        GemvSpec(32, 8, False, unroll=4),
        GemvSpec(16, 16, False, unroll=4),
        GemvSpec(8, 32, False, unroll=4),
        GemvSpec(128, 8, False, unroll=4),
    ),
    # tensor cores: chromium-experimental-subgroup-matrix (f16 x f16 -> f32, 16x16x16) and a subgroup size
    ("f16", "subgroup-matrix"): (
        SgmatSpec(1, 1, 2, 2),
        SgmatSpec(2, 2, 2, 2),
        SgmatSpec(2, 2, 2, 2, bk=64),
        SgmatSpec(2, 2, 4, 2),
        SgmatSpec(2, 2, 2, 4),
        SgmatSpec(4, 2, 2, 2),
        SgmatSpec(2, 2, 4, 4),
        SgmatSpec(2, 2, 4, 4, bk=16, pipelined=1),
        SgmatSpec(2, 2, 2, 2, pipelined=1),
        SgmatSpec(1, 1, 2, 2, pipelined=1),
        SgmatSpec(4, 2, 4, 4, group=8, pipelined=2),
        SgmatSpec(4, 2, 4, 4, pipelined=1, rotate=True),
        SgmatSpec(4, 2, 4, 4, group=8, pipelined=1, rotate=True),
        SgmatSpec(2, 2, 2, 2, pipelined=1, rotate=True),
        SgmatSpec(8, 2, 2, 4, group=16, pipelined=1, rotate=True),
        SgmatSpec(4, 4, 2, 4, group=8, pipelined=1, rotate=True),
        SgmatSpec(4, 4, 2, 4, group=4, pipelined=1, rotate=True),
        SgmatSpec(8, 2, 2, 4, group=8, pipelined=1, rotate=True, plain_b=True),
        SgmatSpec(4, 4, 2, 4, pipelined=1, rotate=True, out_vec=True, packed=True),
        SgmatSpec(4, 4, 2, 4, group=16, pipelined=1, rotate=True, out_vec=True, packed=True),
        SgmatSpec(4, 4, 2, 4, group=8, pipelined=1, rotate=True, out_vec=True, packed=True),
        SgmatSpec(4, 4, 2, 4, group=4, pipelined=1, rotate=True, out_vec=True, packed=True),
        SgmatSpec(4, 4, 2, 4, group=4, pipelined=2, rotate=True, out_vec=True, packed=True),
        SgmatSpec(4, 4, 2, 4, pipelined=1, rotate=True, packed=True),
        SgmatSpec(4, 4, 2, 4, pipelined=1, rotate=True, out_vec=True, packed=True, pingpong=True),
        SgmatSpec(4, 4, 2, 4, pipelined=1, rotate=True, packed=True, pingpong=True),
        SgmatSpec(4, 4, 2, 4, group=16, pipelined=1, rotate=True, out_vec=True, packed=True, pingpong=True),
    ),
    # split-K forms of the tiles that few-row problems prefer (matmul.SPLIT_TILES)
    ("f32 f16", "split-k"): (
        TiledSpec(32, 64, 32, 2, 4, splits=2),
        TiledSpec(32, 64, 32, 2, 4, splits=4),
        TiledSpec(32, 64, 32, 2, 4, splits=8),
        TiledSpec(64, 64, 16, 4, 4, lds4=True, splits=2),
        TiledSpec(64, 64, 16, 4, 4, lds4=True, splits=4),
        TiledSpec(64, 64, 16, 4, 4, lds4=True, splits=8),
    ),
}
# Measured and kept for benchmarks (benchmarks/results/README.md says what each ran at), offered only
# once registered (register_experimental): none is among the candidates the autotuner times.
EXPERIMENTAL: tuple[Spec, ...] = (
    # register-tiled
    TiledSpec(128, 128, 8, 8, 8),
    TiledSpec(64, 128, 16, 4, 8),
    TiledSpec(128, 128, 32, 8, 8),
    TiledSpec(128, 64, 16, 8, 4, lds4=True, group=8),
    TiledSpec(128, 128, 16, 8, 8, group=8),
    TiledSpec(128, 64, 16, 8, 4, lds4=True, pipelined=1),
    TiledSpec(128, 128, 16, 8, 8, lds4=True, pipelined=1),
    TiledSpec(64, 64, 16, 4, 4, lds4=True, pipelined=1),
    TiledSpec(128, 64, 8, 8, 4, lds4=True, pipelined=1),
    TiledSpec(128, 128, 16, 8, 8, pipelined=1),
    TiledSpec(128, 128, 8, 8, 8, lds4=True, pipelined=2),
    TiledSpec(128, 128, 8, 8, 8, lds4=True, double=True, a_rows=True),
    TiledSpec(256, 128, 8, 8, 8, lds4=True, double=True),
    TiledSpec(128, 128, 8, 8, 8, lds4=True, double=True, a_pad=True),
    TiledSpec(128, 128, 8, 8, 8, lds4=True, double=True, group=8, a_pad=True),
    TiledSpec(128, 128, 8, 16, 8, lds4=True, double=True, a_pad=True),
    TiledSpec(128, 128, 8, 8, 16, lds4=True, double=True),
    TiledSpec(128, 128, 8, 8, 8, lds4=True, double=True, a_pad=True, vec_stores=True),
    # tensor cores
    SgmatSpec(2, 4, 2, 2),
    SgmatSpec(4, 4, 2, 2),
    SgmatSpec(2, 4, 4, 4),
    SgmatSpec(4, 2, 4, 4),
    SgmatSpec(2, 2, 4, 4, group=8),
    SgmatSpec(2, 2, 4, 4, pipelined=1),
    SgmatSpec(4, 2, 4, 4, pipelined=1),
    SgmatSpec(2, 4, 4, 4, pipelined=1),
    SgmatSpec(4, 2, 4, 4, bk=16, pipelined=1),
    SgmatSpec(4, 2, 2, 4, pipelined=1),
    SgmatSpec(2, 4, 4, 2, pipelined=1),
    SgmatSpec(4, 4, 2, 2, pipelined=1),
    SgmatSpec(2, 2, 2, 2, bk=64, pipelined=1),
    SgmatSpec(4, 2, 4, 4, pipelined=2),
    SgmatSpec(4, 2, 4, 4, bk=16, pipelined=3),
    SgmatSpec(2, 4, 4, 4, group=8, pipelined=1, rotate=True),
    SgmatSpec(2, 2, 4, 4, group=8, pipelined=1, rotate=True),
    SgmatSpec(2, 2, 4, 4, group=8, double=True),
    SgmatSpec(4, 2, 4, 4, bk=16, group=8, double=True),
    SgmatSpec(2, 4, 4, 4, bk=16, group=8, pipelined=2, rotate=True, double=True),
    SgmatSpec(4, 4, 4, 2, group=8, pipelined=1, rotate=True),
    SgmatSpec(8, 2, 2, 4, group=8, pipelined=1, rotate=True),
    SgmatSpec(8, 2, 2, 4, group=8, pipelined=1, order="down"),
    SgmatSpec(4, 4, 2, 4, group=8, pipelined=1, order="pairs"),
    SgmatSpec(8, 2, 2, 4, bk=16, group=8, pipelined=2, double=True, order="down", results_rounds=2),
    SgmatSpec(4, 4, 2, 4, group=8, pipelined=1, rotate=True, out_vec=True),
    SgmatSpec(4, 4, 2, 4, group=4, pipelined=1, rotate=True, out_vec=True),
    SgmatSpec(8, 2, 2, 4, group=8, pipelined=1, rotate=True, plain_b=True, out_vec=True),
)

VARIANTS: dict[str, Spec] = {}   # what `matmul.variants` offers from, by name: SHIPPING (+ EXPERIMENTAL)


def register(*specs: Spec) -> list[str]:
    """Offer `specs` too (benchmarks, tests), after those offered already; their names."""
    for spec in specs:
        VARIANTS.setdefault(spec.name, spec)
    return [spec.name for spec in specs]


def register_experimental() -> list[str]:
    """Offer the experimental variants too (benchmarks that compare them); their names."""
    return register(*EXPERIMENTAL)


def unregister_experimental() -> None:
    """Stop offering the experimental variants (the default)."""
    shipping = {spec.name for specs in SHIPPING.values() for spec in specs}
    for spec in EXPERIMENTAL:
        if spec.name not in shipping:
            VARIANTS.pop(spec.name, None)


@contextlib.contextmanager
def experimental_offered() -> Iterator[list[str]]:
    """The experimental variants offered while the block runs (tests); their names."""
    added = [spec.name for spec in EXPERIMENTAL if spec.name not in VARIANTS]
    names = register_experimental()
    try:
        yield names
    finally:
        for name in added:
            VARIANTS.pop(name, None)


register(*(spec for specs in SHIPPING.values() for spec in specs))


__all__ = ["GEMV_MAX_ROWS", "VEC_SUFFIX", "COMBINE_THREADS", "TiledSpec", "GemvSpec", "SgmatSpec", "Spec",
           "Variant", "parse_variant", "subgroup_size", "tensor_core_subgroup_size", "fits", "tiled_modes",
           "vec8_axis", "gemv_problem", "gemv_vec", "stream_width", "params_words", "check_grid", "SHIPPING",
           "EXPERIMENTAL", "VARIANTS", "register", "register_experimental", "unregister_experimental",
           "experimental_offered"]
