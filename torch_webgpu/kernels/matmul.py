"""Matmul family: out[b] = epilogue(alpha * A[b] @ B[b]) for batched, strided (transposed) operands.

The problem is declarative (`MatmulProblem`); `variants` lists what can run it on a device (best default
first) and `plan_matmul_steps` returns the dispatches of one (`plan_matmul`: its one launch). Epilogue,
in order: `alpha * acc`, `+ beta * bias` (broadcast by strides), activation, `+ residual`. The variants
(matmul_variants.py, where each spec owns its name, WGSL and grid) are register-tiled SIMT (tile,
outputs per invocation, K depth, vec4 loads), split-K matrix-vector (subgroup or workgroup reduction),
streaming matrix-vector for decode at memory bandwidth (16-byte loads, several in flight per lane; the
default on hardware GPUs) and tensor cores (subgroup matrices, sgmat_wgsl.py).
Split-K tiled variants (".s4": `TiledSpec.splits`) are two dispatches: each of `splits` K slices of a
tile writes its f32 partial sums to a scratch buffer ("partials"), then a combine pass sums them and
applies the epilogue; they multiply the workgroups of problems with few output tiles (ViT's 197-token
matmuls) without shrinking the tile.
Storage may be f32 or f16 (shader-f16); accumulation is always f32. The general variant runs the rest
(`MatmulProblem.general`: bf16 or int32 operands, f16 without shader-f16): 16x16 tiles, any strides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from . import matmul_wgsl as wgsl
from . import sgmat_wgsl
from .family import Family
from .launch import PARAMS, DeviceCaps, KernelLaunch, LaunchPlan, ceil_div, f32_word, i32_word, record
from .matmul_variants import (
    COMBINE_THREADS,
    EXPERIMENTAL,
    GEMV_MAX_ROWS,
    SHIPPING,
    VARIANTS,
    VEC_SUFFIX,
    GemvSpec,
    SgmatSpec,
    TiledSpec,
    Variant,
    experimental_offered,
    fits,
    gemv_problem,
    gemv_vec,
    parse_variant,
    register,
    register_experimental,
    stream_width,
    subgroup_size,
    tensor_core_subgroup_size,
    tiled_modes,
    unregister_experimental,
    vec8_axis,
)
from .matmul_wgsl import ACTIVATIONS
from .wgsl import STORAGE

__all__ = ["FAMILY", "GENERAL", "ACTIVATIONS", "Layout", "MatmulProblem", "plan_matmul", "variants",
           "MatmulPlan", "plan_matmul_steps", "record_matmul", "split_count", "VARIANTS", "SHIPPING",
           "EXPERIMENTAL", "register", "register_experimental", "unregister_experimental",
           "experimental_offered", "parse_variant", "Variant", "TiledSpec", "GemvSpec", "SgmatSpec", "Piece",
           "split_for_binding", "VEC_SUFFIX", "COMBINE_THREADS", "GEMV_MAX_ROWS", "tensor_core_subgroup_size",
           "vec8_axis", "stream_width", "GroupedGemvProblem", "grouped_variants", "plan_grouped_matmul",
           "GROUPED_MAX"]


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
    """One batched matmul with its epilogue. `dtype`: storage type of a, b, bias, residual and out;
    `in_dtype`: the storage type of a, b and bias where it differs (any of kernels/wgsl/storage.py's: the
    general variant, which computes in `dtype` "f32", or "i32" for exact wrapping int32 products)."""

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
    in_dtype: str | None = None

    @property
    def operand_dtype(self) -> str:
        """The storage type of a, b and bias."""
        return self.in_dtype or self.dtype

    @property
    def general(self) -> bool:
        """Only the general variant runs it: int32 products, or operands stored unlike the output."""
        return self.dtype == "i32" or self.operand_dtype != self.dtype

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


# Split-K forms of the tiles that few-row f32 problems prefer (the H200's autotuner chose 32x64 for
# ViT-B/16's 197-token matmuls: 84 workgroups for 132 SMs): "<tile>.s<splits>"
SPLIT_TILES = ("tile32x64.r2x4.k32", "tile64x64.r4x4.k16.l4")
SPLIT_COUNTS = (2, 4, 8)
# split-K is offered while the tiles (times batch) are fewer than this, about two per SM of a large GPU
SPLIT_BELOW_WORKGROUPS = 264
SPLIT_MIN_K = 512
SPLIT_MIN_SLICE = 128      # K per slice: a few K tiles each, or the partials cost more than they save
SPLIT_AFTER = 4            # split candidates follow this many unsplit tiled ones (the autotuner times 6)

# The tensor-core defaults, best first (benchmarks/results/README.md, "Matmul variants"): for problems of
# at least 1024 rows and columns the packed 128x256 tiles, their ".o4" forms first where the output's rows
# are 4-aligned (elsewhere they are not offered and the list closes up); for fewer rows the small tiles.
SGMAT_LARGE = ["sgmat.w4x4.f2x4.k32.pl.rot.o4.p16.pp", "sgmat.w4x4.f2x4.k32.pl.g16.rot.o4.p16.pp",
               "sgmat.w4x4.f2x4.k32.pl.rot.o4.p16", "sgmat.w4x4.f2x4.k32.pl.g16.rot.o4.p16",
               "sgmat.w4x4.f2x4.k32.pl.g8.rot.o4.p16", "sgmat.w4x4.f2x4.k32.pl.g4.rot.o4.p16",
               "sgmat.w4x4.f2x4.k32.pl.rot.p16.pp", "sgmat.w4x4.f2x4.k32.pl.rot.p16",
               "sgmat.w4x4.f2x4.k32.pl2.g4.rot.o4.p16",
               "sgmat.w4x4.f2x4.k32.pl.g8.rot.o4", "sgmat.w4x4.f2x4.k32.pl.g4.rot.o4",
               "sgmat.w4x4.f2x4.k32.pl.g8.rot", "sgmat.w4x4.f2x4.k32.pl.g4.rot",
               "sgmat.w8x2.f2x4.k32.pl.g8.rot.bp.o4", "sgmat.w8x2.f2x4.k32.pl.g8.rot.bp",
               "sgmat.w8x2.f2x4.k32.pl.g16.rot", "sgmat.w8x2.f2x4.k32.pl.g8.rot",
               "sgmat.w4x4.f4x2.k32.pl.g8.rot", "sgmat.w4x2.f4x4.k32.pl.g8.rot",
               "sgmat.w4x2.f4x4.k32.pl.rot", "sgmat.w4x2.f4x4.k32.pl2.g8"]
SGMAT_SKINNY = ["sgmat.w1x1.f2x2.k32", "sgmat.w2x2.f2x2.k64", "sgmat.w2x2.f2x2.k32", "sgmat.w4x2.f2x2.k32",
                "sgmat.w2x2.f4x2.k32", "sgmat.w2x2.f2x4.k32"]

GENERAL = "general"    # the strided 16x16-tile kernel of any storage dtype (MatmulProblem.general)
MatmulPlan = LaunchPlan   # the dispatches of one matmul variant, in order, and their scratch (role -> bytes)


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
    if p.general:
        return [GENERAL] if _general_applies(p) else []
    if p.dtype not in ("f32", "f16") or (p.dtype == "f16" and not caps.shader_f16):
        return []
    names: list[str] = []
    g = gemv_problem(p)
    if g is not None:
        b_k_contig = g.b.row_stride == 1
        stream = _stream_variants(g, caps, b_k_contig)
        # hardware GPUs run the streaming forms first (eager decode gemvs are below the autotuner's
        # FLOP floor, so the default is what runs; plans time the first few); software Vulkan keeps
        # the cheap split-K default
        if not caps.cpu:
            names += stream
        for name, spec in VARIANTS.items():
            if spec.kind != "gemv" or spec.unroll:
                continue
            sg = subgroup_size(caps)
            if spec.subgroup and not (caps.subgroups and sg and spec.lk % sg == 0 and spec.k_fast):
                continue
            if spec.k_fast != b_k_contig:
                continue
            if fits(caps, spec.threads, spec.workgroup_bytes(p.dtype, GEMV_MAX_ROWS, sg or 1)):
                if spec.k_fast and gemv_vec(g):
                    names.append(name + VEC_SUFFIX)
                names.append(name)
        if caps.cpu:
            names += stream
    sg = tensor_core_subgroup_size(caps)
    out4 = p.out.vec4_along("col", p.n)   # the ".o4" forms store 4 adjacent outputs at once
    if p.dtype == "f16" and sg and min(p.m, p.n) >= 16:
        first = SGMAT_LARGE if min(p.m, p.n) >= 1024 else SGMAT_SKINNY
        b_cols = vec8_axis(p.b, p.k, p.n) == "rows"   # how sgmat_source stores this problem's B tile
        for name in [n for n in first if n in VARIANTS] + [n for n, s in VARIANTS.items()
                                                          if s.kind == "sgmat" and n not in first]:
            spec = VARIANTS[name]
            if spec.out_vec and not (out4 and sg <= sgmat_wgsl.OUT_VEC_MAX_SUBGROUP):
                continue
            threads = spec.sg_m * spec.sg_n * sg
            if fits(caps, threads, spec.workgroup_bytes(p.dtype, b_cols)):
                names.append(name)
    a_mode, b_mode = tiled_modes(p)
    vec = a_mode in ("k", "i") or b_mode in ("k", "i")
    # the [i][k] A tiles (".ar") and padded [k][i] ones (".ap") read A in vec4s along K: offered in their
    # vec4 form for such an A only
    tiled = [n for n, s in VARIANTS.items() if s.kind == "tiled" and s.splits == 1
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
               if n in tiled and fits(caps, VARIANTS[n].threads, VARIANTS[n].workgroup_bytes(p.dtype))]
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
        spec = parse_variant(tile).spec
        count = split_count(p, spec)
        if count is None or not fits(caps, spec.threads, spec.workgroup_bytes(p.dtype)):
            continue
        # the partial sums are one f32 binding; the slices of every batch share grid z
        if (4 * count * p.batch * p.m * p.n > caps.limit("max-storage-buffer-binding-size", 128 << 20)
                or count * p.batch > limit):
            continue
        names.append(replace(spec, splits=count).name)
    return names


def _stream_variants(g: MatmulProblem, caps: DeviceCaps, k_fast: bool) -> list[str]:
    """The streaming gemv names (16-byte forms first when the layouts allow them) that fit `caps`."""
    if not (g.b.row_stride == 1 or g.b.col_stride == 1):
        return []
    sg = subgroup_size(caps) if caps.subgroups else None
    vw = stream_width(g, k_fast)
    limit = caps.limit("max-compute-workgroups-per-dimension", 65535)
    fitting = []
    for name in _stream_order(g, k_fast, vw, sg):
        spec = parse_variant(name).spec
        cols = spec.ln * (vw if not k_fast else 1)
        if (ceil_div(g.n, cols) <= limit
                and fits(caps, spec.threads, spec.workgroup_bytes(g.dtype, GEMV_MAX_ROWS, sg or 1))):
            fitting.append(name)
    # 16-byte forms first: the autotuner and compiled plans take the first few candidates only
    return ([n + VEC_SUFFIX for n in fitting] if vw > 1 else []) + fitting


def _general_applies(p: MatmulProblem) -> bool:
    return (p.dtype in ("f32", "i32") and p.operand_dtype in STORAGE and p.residual is None
            and p.activation is None)


def _plan_general(p: MatmulProblem) -> KernelLaunch:
    """The general variant's launch: every operand through its own strides (as given: the params are
    the eager device's), the output `p.dtype`."""
    if p.batch > 65535:
        raise NotImplementedError(f"webgpu: matmul batch {p.batch} exceeds 65535")
    word = f32_word if p.dtype == "f32" else i32_word
    scalar = float if p.dtype == "f32" else int
    bias = p.bias.words() + [1] if p.bias else [0] * 5
    params = ([p.m, p.n, p.k, p.batch] + p.a.words() + p.b.words() + p.out.words() + [0] * 4 + bias
              + [word(scalar(p.alpha)), word(scalar(p.beta))])
    roles = (PARAMS, "a", "b", "out") + (("bias",) if p.bias else ())
    src = wgsl.general_source(p.operand_dtype, p.operand_dtype, p.operand_dtype if p.bias else None, p.dtype)
    tile = wgsl.GENERAL_TILE
    return KernelLaunch(name=f"matmul.{p.operand_dtype}to{p.dtype}.{GENERAL}", wgsl=src,
                        grid=(ceil_div(p.n, tile), ceil_div(p.m, tile), p.batch),
                        workgroup_size=(tile, tile, 1), bindings=roles, params=tuple(params),
                        read_only=frozenset(i for i, r in enumerate(roles) if r not in ("out", PARAMS)))


def _unsupported(p: MatmulProblem) -> TypeError:
    """Why no variant runs `p`."""
    if p.dtype == "f16" and not p.general:
        return TypeError("matmul: dtype f16 needs the adapter feature 'shader-f16'")
    if p.general:
        return TypeError(f"matmul: {p.operand_dtype} operands into {p.dtype} with a residual or an "
                         "activation: the general variant has neither (apply them after the product)")
    return TypeError(f"matmul: dtype {p.dtype} is not supported by the library (f32, f16)")


def plan_matmul_steps(p: MatmulProblem, caps: DeviceCaps, variant: str | None = None) -> MatmulPlan:
    """The dispatches of `p` with `variant` (one of `variants(p, caps)`, default the first): one launch,
    or for a split-K variant its slices into scratch "partials" and the combine pass (roles params,
    "partials", "out", "bias", "residual")."""
    names = variants(p, caps)
    if names == [GENERAL] and variant in (None, GENERAL):
        return MatmulPlan((_plan_general(p),))
    if not names:
        raise _unsupported(p)
    p = p.normalized()
    if p.activation not in ACTIVATIONS:
        raise ValueError(f"matmul epilogue: unknown activation {p.activation!r} "
                         f"({sorted(map(str, ACTIVATIONS))})")
    variant = variant or names[0]
    if variant not in names:
        raise ValueError(f"matmul variant {variant!r} is not one of {names}")
    chosen = parse_variant(variant)
    return chosen.spec.plan(p, caps, chosen.vec)


def plan_matmul(p: MatmulProblem, caps: DeviceCaps, variant: str | None = None) -> KernelLaunch:
    """The launch of `p` on `caps` (`variant`: one of `variants(p, caps)`, default the first; not a
    split-K one, whose two dispatches `plan_matmul_steps` gives)."""
    plan = plan_matmul_steps(p, caps, variant)
    if len(plan.steps) != 1:
        raise ValueError(f"matmul variant {variant!r} is split-K, two dispatches with a scratch buffer: "
                         "plan it with plan_matmul_steps")
    return plan.steps[0]


FAMILY = Family("matmul", variants, plan_matmul_steps)


def record_matmul(plan: MatmulPlan, operands: Mapping, rt=None) -> None:
    """Record the plan's dispatches with `operands[role]` (buffer id or BufferSlice; the scratch roles
    of `plan.scratch` included)."""
    for launch in plan.steps:
        record(launch, operands, rt)


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
        ln = parse_variant(name).spec.ln
        if all(name in other for other in per[1:]) and sum(ceil_div(p.n, ln) for p in problems) <= limit:
            names.append(name)
    return names


def plan_grouped_matmul(gp: GroupedGemvProblem, caps: DeviceCaps,
                        variant: str | None = None) -> KernelLaunch:
    """The one launch of every product of `gp` (bindings: a, b0, b1, ..., out)."""
    gp.check()
    names = grouped_variants(gp, caps)
    if not names:
        raise TypeError(f"grouped gemv of {len(gp.problems)} {gp.dtype} products: no variant on this device "
                        "(storage buffers per stage, shader-f16 or the layouts); run them one by one")
    variant = variant or names[0]
    if variant not in names:
        raise ValueError(f"grouped gemv variant {variant!r} is not one of {names}")
    spec = parse_variant(variant).spec
    assert spec.kind == "gemv" and spec.unroll and spec.k_fast
    ps = [p.normalized() for p in gp.problems]
    first = ps[0]
    mr = 1 << max(0, (first.m - 1).bit_length())
    vw = stream_width(first, True) if variant.endswith(VEC_SUFFIX) else 1
    sg = subgroup_size(caps) if spec.subgroup else None
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
