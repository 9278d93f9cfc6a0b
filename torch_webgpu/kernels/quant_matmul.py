"""Quantized-weight matmul family: out = epilogue(alpha * A @ dequant(W)^T), W an [N, K] linear weight.

The weight-only quantization of torchao (`IntxWeightOnlyConfig`, `Int8WeightOnlyConfig`): W[n, k] =
(q[n, k] - zero[n, g]) * scale[n, g] with g = k // group. The quantized values stay packed in u32
words on the device and are dequantized in registers; each group's partial dot product is scaled once.

Weight formats (`QuantWeight.fmt`), row n of q starts at word n * words_per_row:
- "i8": one signed byte per weight, 4 per word, little-endian (torch's int8 storage as it is, so a
  graph input holding torchao's `qdata` binds directly);
- "i4": two's-complement nibbles, 8 per word, low nibble first (`pack_weight` packs at plan-build time).
Zero points (optional) are signed bytes [N, groups], 4 per word; scales [N, groups] in f32 or f16.

Variants: "gemv" (M <= GEMV_MAX_ROWS, decode: each workgroup owns LN output columns, LK invocations split
K in 8-weight chunks, reduced in workgroup memory), streaming "gemv.k*n*.u2[.sg]" (decode at memory
bandwidth: 16-byte loads of packed weights, dequantized in registers; the default on hardware GPUs),
"tiled" (prefill: a BM × BN output tile per workgroup, K tiles of A and of the dequantized W staged in
workgroup memory) and "sgmat" (prefill with f16 activations on tensor cores: the dense matmul's
subgroup-matrix tile, W dequantized into its f16 B tile). A and out are f32 or f16
(shader-f16); accumulation is f32. The epilogue (bias, activation, residual) is the matmul family's.
torch-free: numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .family import Family, single
from .launch import PARAMS, DeviceCaps, KernelLaunch, ceil_div, f32_word
from .matmul import GroupedProblems, Layout, tensor_core_subgroup_size, vec8_axis
from .matmul_variants import GemvSpec, SgmatSpec, TiledSpec, parse_variant
from .matmul_wgsl import (
    ACTIVATIONS,
    Epilogue,
    activation_functions,
    finish_fn,
    glu_finish,
    glu_parts,
    grouped_branches,
    grouped_finish,
    grouped_header,
    grouped_select,
    lane_reduce,
    tile_at,
)
from .sgmat_wgsl import SGMAT_DIAGNOSTICS, SgmatTile, sgmat_main, staging_scalar, staging_vec8

__all__ = ["QuantWeight", "QuantMatmulProblem", "plan_quant_matmul", "quant_variants", "pack_weight",
           "pack_bytes", "pack_scales", "pack_constant", "WEIGHT_FORMATS", "GEMV_MAX_ROWS", "CHUNK",
           "GroupedQuantProblem", "grouped_quant_variants", "plan_grouped_quant_matmul"]

WEIGHT_FORMATS = {"i8": 4, "i4": 8}   # weights per u32 word
CHUNK = 8                             # weights one invocation dequantizes at a time (one group only)
GEMV_MAX_ROWS = 4
# The variants, named as the dense family's (matmul_variants.py) by the same specs: split-K gemv (LK lanes
# along K per row of W, LN rows a workgroup, a workgroup-memory tree); streaming gemv for decode at memory
# bandwidth (lanes per weight row, rows per workgroup, 2 loads in flight per lane, each 16 bytes of packed
# weights: 32 int4 / 16 int8, dequantized in registers; their ".sg" forms combine the lanes through
# subgroups); register tiles; and the dense tensor-core tiles (H200 f16: w2x2.f4x4 best at 4096^3,
# w2x2.f2x2 on skinny shapes)
GEMV = (GemvSpec(64, 4, True), GemvSpec(32, 8, True), GemvSpec(16, 16, True))
STREAM = (GemvSpec(4, 32, True, unroll=2), GemvSpec(8, 16, True, unroll=2), GemvSpec(16, 8, True, unroll=2),
          GemvSpec(32, 4, True, unroll=2))
TILED = (TiledSpec(64, 64, 16, 4, 4), TiledSpec(32, 32, 16, 2, 2))
SGMAT = (SgmatSpec(2, 2, 4, 4), SgmatSpec(4, 2, 4, 4), SgmatSpec(2, 2, 4, 2), SgmatSpec(2, 2, 2, 2))


@dataclass(frozen=True)
class QuantWeight:
    """How W is stored: format, weights per scale group along K, zero points present, scale dtype."""

    fmt: str
    group: int
    zero: bool
    scale_dtype: str = "f32"

    def words_per_row(self, k: int) -> int:
        """u32 words of one packed row of K weights."""
        return k // WEIGHT_FORMATS[self.fmt]


@dataclass(frozen=True)
class QuantMatmulProblem:
    """out[m, n] = epilogue(alpha * sum_k A[m, k] * W[n, k]); `dtype`: storage of A, bias, residual, out."""

    m: int
    n: int
    k: int
    a: Layout
    out: Layout
    weight: QuantWeight
    dtype: str = "f32"
    bias: Layout | None = None
    residual: Layout | None = None
    activation: str | None = None
    alpha: float = 1.0
    beta: float = 1.0
    a_dtype: str | None = None    # storage of A when it differs (f16 activations, f32 result)

    @property
    def flops(self) -> int:
        """2·M·N·K."""
        return 2 * self.m * self.n * self.k

    def shape_class(self) -> str:
        """A coarse key for autotuning (shapes in one class share a winner) with the weight format."""
        def bucket(x: int) -> int:
            return 1 << max(0, (x - 1).bit_length())
        w = self.weight
        return f"m{bucket(self.m)}n{bucket(self.n)}k{bucket(self.k)}{w.fmt}g{w.group}{'z' if w.zero else ''}"

    @property
    def activation_dtype(self) -> str:
        """The storage type of A."""
        return self.a_dtype or self.dtype

    def check(self) -> None:
        """ValueError/TypeError naming what the library cannot run."""
        w = self.weight
        if w.fmt not in WEIGHT_FORMATS:
            raise ValueError(f"quant matmul: weight format {w.fmt!r} is not one of {sorted(WEIGHT_FORMATS)}")
        if {self.dtype, self.activation_dtype, w.scale_dtype} - {"f32", "f16"}:
            raise TypeError(f"quant matmul: activations {self.dtype} / scales {w.scale_dtype} "
                            "(f32 or f16 only)")
        if self.k % CHUNK or w.group % CHUNK or self.k % w.group:
            raise ValueError(f"quant matmul: K={self.k} and group={w.group} must be multiples of {CHUNK} "
                             "with K a multiple of the group")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"quant matmul epilogue: unknown activation {self.activation!r}")


def quant_variants(p: QuantMatmulProblem, caps: DeviceCaps) -> list[str]:
    """Variant names that can run `p` on `caps`, best default first ([] when none can)."""
    try:
        p.check()
    except (ValueError, TypeError):
        return []
    if "f16" in (p.dtype, p.activation_dtype, p.weight.scale_dtype) and not caps.shader_f16:
        return []
    threads = caps.limit("max-compute-invocations-per-workgroup", 256)
    wg_bytes = caps.limit("max-compute-workgroup-storage-size", 16384)
    names = []
    stream = _stream_variants(p, caps) if p.m <= GEMV_MAX_ROWS else []
    if not caps.cpu:  # hardware GPUs: the bandwidth forms first (eager decode never reaches the tuner)
        names += stream
    sg = tensor_core_subgroup_size(caps)
    if p.m > GEMV_MAX_ROWS and p.activation_dtype == "f16" and sg:
        for spec in SGMAT if p.m * p.n >= 1 << 20 else SGMAT[::-1]:
            tile = _sgmat_tile(spec, sg)
            if tile.threads <= threads and tile.workgroup_bytes <= wg_bytes:
                names.append(spec.name)
    if p.m <= GEMV_MAX_ROWS:
        for spec in GEMV:
            if spec.threads <= threads and 4 * GEMV_MAX_ROWS * spec.threads <= wg_bytes:
                names.append(spec.name)
    if caps.cpu:
        names += stream
    for spec in TILED if p.m * p.n >= 1 << 14 else TILED[::-1]:
        if spec.threads <= threads and 4 * spec.bk * (spec.bm + spec.bn) <= wg_bytes:
            names.append(spec.name)
    return names


def stream_chunk(p: QuantMatmulProblem) -> int:
    """Weights in one 16-byte load of the packed rows (32 int4, 16 int8), or 0 when the streaming gemv
    cannot run `p`: rows of whole 16-byte units, groups of whole loads, A contiguous and 4-aligned."""
    ch = 4 * WEIGHT_FORMATS[p.weight.fmt]
    a = p.a
    ok = (p.k % ch == 0 and p.weight.group % ch == 0 and a.col_stride == 1
          and a.offset % 4 == 0 and (p.m == 1 or a.row_stride % 4 == 0))
    return ch if ok else 0


def _stream_variants(p: QuantMatmulProblem, caps: DeviceCaps) -> list[str]:
    """The streaming gemv names for `p` on `caps`, best guess first: about 4 loads per lane, at least
    32K lanes in the grid; subgroup-combined forms before workgroup-memory ones."""
    ch = stream_chunk(p)
    if not ch:
        return []
    sg = caps.subgroup_size if caps.subgroups else None
    loads = p.k // ch
    lanes = 4
    while lanes < 32 and (loads // lanes >= 8 or (p.n * lanes < 32768 and loads // lanes >= 4)):
        lanes *= 2
    order = sorted(STREAM, key=lambda spec: abs(spec.lk.bit_length() - lanes.bit_length()))
    limit = caps.limit("max-compute-workgroups-per-dimension", 65535)
    names = []
    for spec in order:
        if (spec.threads > caps.limit("max-compute-invocations-per-workgroup", 256)
                or ceil_div(p.n, spec.ln) > limit):
            continue
        if sg and (spec.lk % sg == 0 or sg % spec.lk == 0):
            names.append(replace(spec, subgroup=True).name)
        names.append(spec.name)
    return names


def _header(p: QuantMatmulProblem, e: Epilogue, a_elem: str | None = None, stream: bool = False,
            enables: tuple[str, ...] = ()) -> tuple[str, list[str]]:
    """Enables, params, bindings and the dequantization helpers; A bound as `a_elem` (default: its
    storage type); `stream`: Q and A bound as 16-byte vectors, the chunk helper left out."""
    t, s, ta = p.dtype, p.weight.scale_dtype, p.activation_dtype
    if stream:
        a_elem = f"vec4<{ta}>"
    roles = [PARAMS, "a", "q", "scale", "out"] + (["zero"] if p.weight.zero else []) + (
        ["bias"] if p.bias else []) + (["residual"] if p.residual else [])
    arrays = {"a": f"A: array<{a_elem or ta}>", "q": f"Q: array<{'vec4<u32>' if stream else 'u32'}>",
              "scale": f"S: array<{s}>",
              "out": f"O: array<{t}>", "zero": "Z: array<u32>", "bias": f"C: array<{t}>",
              "residual": f"R: array<{t}>"}
    lines = ["enable f16;" if "f16" in (t, s, ta) else "", *(f"enable {x};" for x in enables),
             "struct Params { mnkb: vec4<u32>, a: vec4<u32>, o: vec4<u32>, c: vec4<u32>, r: vec4<u32>,",
             "                ab: vec4<f32>, q: vec4<u32> }",
             "@group(0) @binding(0) var<uniform> P: Params;"]
    for i, role in enumerate(roles[1:], 1):
        access = "read_write" if role == "out" else "read"
        lines.append(f"@group(0) @binding({i}) var<storage, {access}> {arrays[role]};")
    per_word = WEIGHT_FORMATS[p.weight.fmt]
    if p.weight.fmt == "i8":
        unpack = ("  let w0 = Q[n * P.q.z + c * 2u]; let w1 = Q[n * P.q.z + c * 2u + 1u];\n"
                  + "\n".join(f"  v[{j}] = f32(i32(w{j // 4} << {24 - 8 * (j % 4)}u) >> 24u) - z;"
                              for j in range(CHUNK)))
    else:
        unpack = ("  let w0 = Q[n * P.q.z + c];\n"
                  + "\n".join(f"  v[{j}] = f32(i32(w0 << {28 - 4 * j}u) >> 28u) - z;" for j in range(CHUNK)))
    helpers = _dequant_helpers(p.weight.zero)
    if stream:
        return "\n".join(lines) + "\n" + activation_functions(e.activation) + helpers, roles
    helpers += f"""// weights k = {CHUNK}c .. {CHUNK}c+{CHUNK - 1} of row n minus their zero point
// ({per_word} per word)
fn chunk(n: u32, c: u32) -> array<f32, {CHUNK}> {{
  var v: array<f32, {CHUNK}>;
  let z = zero_of(n, c * {CHUNK}u / P.q.x);
{unpack}
  return v;
}}
"""
    return "\n".join(lines) + "\n" + activation_functions(e.activation) + helpers, roles


def _gemv_source(p: QuantMatmulProblem, e: Epilogue, lk: int, ln: int, mr: int) -> tuple[str, list[str]]:
    head, roles = _header(p, e)
    accs = "\n".join(f"  var acc{r} = 0.0;" for r in range(mr))
    dots = "\n".join(
        f"      if (m0 + {r}u < M) {{ let ab = abase + (m0 + {r}u) * P.a.z + k0 * P.a.w; var d = 0.0;\n"
        + "".join(f"        d = fma(f32(A[ab + {j}u * P.a.w]), w[{j}], d);\n" for j in range(CHUNK))
        + f"        acc{r} = fma(d, s, acc{r}); }}" for r in range(mr))
    stores = "\n".join(f"  red[({r}u * {ln}u + lid.y) * {lk}u + lid.x] = acc{r};" for r in range(mr))
    done = "\n".join(f"    finish(0u, m0 + {r}u, col, red[({r}u * {ln}u + lid.y) * {lk}u]);"
                     for r in range(mr))
    src = f"""{head}{finish_fn(e)}
var<workgroup> red: array<f32, {mr * ln * lk}>;
@compute @workgroup_size({lk}, {ln})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {{
  let M = P.mnkb.x; let N = P.mnkb.y; let K = P.mnkb.z;
  let m0 = wid.y * {mr}u;
  let col = wid.x * {ln}u + lid.y;
  let abase = P.a.x;
{accs}
  if (col < N) {{
    for (var c = lid.x; c < K / {CHUNK}u; c += {lk}u) {{
      let k0 = c * {CHUNK}u;
      let w = chunk(col, c);
      let s = scale_of(col, k0 / P.q.x);
{dots}
    }}
  }}
{stores}
  workgroupBarrier();
  for (var h = {lk // 2}u; h > 0u; h = h >> 1u) {{
    if (lid.x < h) {{
      for (var r = 0u; r < {mr}u; r++) {{
        let i = (r * {ln}u + lid.y) * {lk}u + lid.x;
        red[i] += red[i + h];
      }}
    }}
    workgroupBarrier();
  }}
  if (lid.x == 0u) {{
{done}
  }}
}}
"""
    return src, roles


def _dequant_helpers(zero: bool, sfx: str = "") -> str:
    """`zero_of{sfx}(n, g)` and `scale_of{sfx}(n, g)` reading Z{sfx} / S{sfx} (P.q.y groups per row)."""
    z = (f"  let e = n * P.q.y + g;\n  return f32(i32(Z{sfx}[e / 4u] << (24u - 8u * (e % 4u))) >> 24u);"
         if zero else "  return 0.0;")
    return f"""
fn zero_of{sfx}(n: u32, g: u32) -> f32 {{
{z}
}}
fn scale_of{sfx}(n: u32, g: u32) -> f32 {{ return f32(S{sfx}[n * P.q.y + g]); }}
"""


def _stream_source(p: QuantMatmulProblem, e: Epilogue, lanes: int, cols: int, unroll: int, mr: int,
                   subgroup: int | None, grouped: tuple[str | None, ...] = (),
                   glu: bool = False) -> tuple[str, list[str]]:
    """Decode at memory bandwidth: `lanes` consecutive invocations own one weight row and walk it in
    16-byte loads (`unroll` in flight each), dequantized in registers with vector shifts, each load's
    dot product scaled once (a load never straddles a group); `cols` rows per workgroup, lanes combined
    by `lane_reduce`. Out-of-range columns/rows are clamped for the loads and dropped by `finish`.

    `grouped` (one activation per problem): sibling linears of the same A and weight format with their
    own q/scale/zero bindings (Q0, S0, Z0, Q1, ...) in ONE dispatch, as the dense family's grouped
    gemv (matmul_wgsl.grouped_select): outputs in one buffer at each problem's layout; `glu`: one
    output act0(x W0^T) * (x W1^T) (matmul_wgsl.glu_parts)."""
    enables = ("subgroups",) if subgroup else ()
    if grouped:
        head, roles = _grouped_header(p, len(grouped), enables)
        head += glu_finish(p.dtype, grouped[0]) if glu else grouped_finish(p.dtype, grouped)
    else:
        head, roles = _header(p, e, stream=True, enables=enables)
        head += finish_fn(e)
    unroll = max(1, unroll // mr)   # several rows reuse each load already; keeps the code (and compile) small
    fmt = p.weight.fmt
    ch = stream_chunk(p)
    words = []  # (word index in the 16-byte load, shift vectors, A offset in elements)
    if fmt == "i4":
        for q in range(4):
            words += [(q, "28u, 24u, 20u, 16u", 8 * q), (q, "12u, 8u, 4u, 0u", 8 * q + 4)]
        down = "28u"
    else:
        words = [(q, "24u, 16u, 8u, 0u", 4 * q) for q in range(4)]
        down = "24u"
    rows = "\n".join(f"  let arow{r} = P.a.x + min(m0 + {r}u, M - 1u) * P.a.z;" for r in range(mr))
    accs = "\n".join(f"  var acc{r} = 0.0;" for r in range(mr))

    def load(u: int, sfx: str) -> list[str]:
        return [f"    let c{u} = min(cb + lane + {u * lanes}u, loads - 1u);",
                f"    let q{u} = Q{sfx}[qrow + c{u}];"]

    def math(u: int, sfx: str, acc: str) -> list[str]:
        # a load past the row's end re-reads its last one (no branch) and counts zero
        out = [f"    {{ let k0 = c{u} * {ch}u; let g = k0 / P.q.x;",
               f"      let s = select(0.0, scale_of{sfx}(cc, g), cb + lane + {u * lanes}u < loads);",
               f"      let z = vec4<f32>(zero_of{sfx}(cc, g));"]
        for i, (q, shifts, _) in enumerate(words):
            out.append(f"      let w{i} = vec4<f32>((vec4<i32>(bitcast<i32>(q{u}[{q}])) "
                       f"<< vec4<u32>({shifts})) >> vec4<u32>({down})) - z;")
        for r in range(mr):
            terms = " + ".join(f"dot(vec4<f32>(A[(arow{r} + k0) / 4u + {off // 4}u]), w{i})"
                               for i, (_, _, off) in enumerate(words))
            out.append(f"      {acc}{r} = fma({terms}, s, {acc}{r});")
        out.append("    }")
        return out

    def walk(sfx: str, indent: str = "", acc: str = "acc") -> list[str]:
        main = [x for u in range(unroll) for x in load(u, sfx)]
        main += [x for u in range(unroll) for x in math(u, sfx, acc)]
        lines = ["  let cc = min(col, N - 1u);", "  let qrow = cc * (P.q.z / 4u);",
                 f"  for (var cb = 0u; cb < loads; cb += {lanes * unroll}u) {{", *main, "  }"]
        return [indent + x for x in lines]

    names = [f"acc{r}" for r in range(mr)]
    diag = "diagnostic(off, subgroup_uniformity);\n" if subgroup else ""
    if glu:
        find, body, done, names = glu_parts(lambda i, acc: walk(str(i), "  ", acc), mr, cols)
        accs += "\n" + "\n".join(f"  var up{r} = 0.0;" for r in range(mr))
    elif grouped:
        n = len(grouped)
        find = grouped_select(n, cols)
        body = grouped_branches(n, lambda i: walk(str(i), "  "))
        done = grouped_branches(n, lambda i: [f"    finish{i}(m0 + {r}u, col, acc{r});" for r in range(mr)])
    else:
        find = f"  let N = P.mnkb.y;\n  let col = wid.x * {cols}u + slot;"
        body = "\n".join(walk(""))
        done = "\n".join(f"    finish(0u, m0 + {r}u, col, acc{r});" for r in range(mr))
    decl, reduce = lane_reduce(names, lanes, cols, subgroup)
    src = f"""{diag}{head}
{decl}
@compute @workgroup_size({lanes * cols})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {{
  let M = P.mnkb.x; let K = P.mnkb.z;
  let m0 = wid.y * {mr}u;
  let lane = li % {lanes}u; let slot = li / {lanes}u;
{find}
{rows}
{accs}
  let loads = K / {ch}u;
{body}
{reduce}
  if (lane == 0u) {{
{done}
  }}
}}
"""
    return src, roles


def _grouped_header(p: QuantMatmulProblem, groups: int, enables: tuple[str, ...]) -> tuple[str, list[str]]:
    """The grouped form's params, bindings (a; q, scale[, zero] per problem; out) and helpers."""
    s, zero = p.weight.scale_dtype, p.weight.zero
    decls, roles = [], [PARAMS, "a"]
    for i in range(groups):
        decls += [f"Q{i}: array<vec4<u32>>", f"S{i}: array<{s}>"] + ([f"Z{i}: array<u32>"] if zero else [])
        roles += [f"q{i}", f"scale{i}"] + ([f"zero{i}"] if zero else [])
    roles.append("out")
    head = grouped_header(p.dtype, f"vec4<{p.activation_dtype}>", decls, enables,
                          per_problem=3 if zero else 2, extra="q: vec4<u32>")
    return head + "".join(_dequant_helpers(zero, str(i)) for i in range(groups)), roles


def _tiled_source(p: QuantMatmulProblem, e: Epilogue, bm: int, bn: int, bk: int, tm: int,
                  tn: int) -> tuple[str, list[str]]:
    head, roles = _header(p, e)
    tx, ty = bn // tn, bm // tm
    threads = tx * ty
    accs = "\n".join(f"  var acc{i}_{j} = 0.0;" for i in range(tm) for j in range(tn))
    reads = "\n".join([f"      let a{i} = As[k * {bm}u + lid.y + {i * ty}u];" for i in range(tm)]
                      + [f"      let b{j} = Bs[k * {bn}u + lid.x + {j * tx}u];" for j in range(tn)])
    fmas = "\n".join(f"      acc{i}_{j} = fma(a{i}, b{j}, acc{i}_{j});" for i in range(tm) for j in range(tn))
    stores = "\n".join(f"  finish(0u, m0 + lid.y + {i * ty}u, n0 + lid.x + {j * tx}u, acc{i}_{j});"
                       for i in range(tm) for j in range(tn))
    a_units = bm * bk
    chunks = bn * bk // CHUNK
    per_row = bk // CHUNK
    w_store = "\n".join(f"        Bs[(kk + {j}u) * {bn}u + nn] = w[{j}] * s;" for j in range(CHUNK))
    src = f"""{head}{finish_fn(e)}
var<workgroup> As: array<f32, {bm * bk}>;
var<workgroup> Bs: array<f32, {bn * bk}>;
@compute @workgroup_size({tx}, {ty})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {{
  let M = P.mnkb.x; let N = P.mnkb.y; let K = P.mnkb.z;
  let m0 = wid.y * {bm}u; let n0 = wid.x * {bn}u;
{accs}
  for (var t = 0u; t < K; t += {bk}u) {{
    for (var u = li; u < {a_units}u; u += {threads}u) {{
      let kk = u % {bk}u; let ii = u / {bk}u;
      let gi = m0 + ii; let gk = t + kk;
      var x = 0.0;
      if (gi < M && gk < K) {{ x = f32(A[P.a.x + gi * P.a.z + gk * P.a.w]); }}
      As[kk * {bm}u + ii] = x;
    }}
    for (var u = li; u < {chunks}u; u += {threads}u) {{
      let kk = (u % {per_row}u) * {CHUNK}u; let nn = u / {per_row}u;
      let gn = n0 + nn; let gk = t + kk;
      if (gn < N && gk < K) {{
        let w = chunk(gn, gk / {CHUNK}u);
        let s = scale_of(gn, gk / P.q.x);
{w_store}
      }} else {{
        for (var j = 0u; j < {CHUNK}u; j++) {{ Bs[(kk + j) * {bn}u + nn] = 0.0; }}
      }}
    }}
    workgroupBarrier();
    for (var k = 0u; k < {bk}u; k++) {{
{reads}
{fmas}
    }}
    workgroupBarrier();
  }}
{stores}
}}
"""
    return src, roles


def _sgmat_tile(spec: SgmatSpec, sg: int) -> SgmatTile:
    """The tensor-core tile of `spec`; W's rows are K-contiguous, so its tile is stored [n][k] (each
    invocation writes 8 consecutive halves)."""
    return SgmatTile(spec.sg_m, spec.sg_n, spec.fm, spec.fn, spec.bk, sg, spec.pad, b_cols=True)


def _sgmat_source(p: QuantMatmulProblem, e: Epilogue, spec: SgmatSpec, sg: int,
                  vec_a: str) -> tuple[str, list[str]]:
    """The dense tensor-core tile with B = dequant(W)^T: each invocation dequantizes 8 weights of one
    row of W (one group) into the f16 B tile, stored by columns."""
    head, roles = _header(p, e, "vec4<u32>" if vec_a else None,
                          enables=("chromium_experimental_subgroup_matrix",))
    g = _sgmat_tile(spec, sg)
    stage_a = (staging_vec8 if vec_a else staging_scalar)(
        g.bm, g.bk, "A", "a", "m0", "M", "t", "K", g.a_store, *((vec_a,) if vec_a else (p.activation_dtype,)),
        g.threads)
    chunks = g.bn * g.bk // CHUNK
    per_col = g.bk // CHUNK
    cells = [tile_at(g.b_store, f"kk + {j}u", "nn") for j in range(CHUNK)]
    put = "\n".join(f"        {cell} = f16(w[{j}] * s);" for j, cell in enumerate(cells))
    zero = "\n".join(f"        {cell} = f16(0.0);" for cell in cells)
    stage_b = f"""  for (var u = 0u; u < {-(-chunks // g.threads)}u; u++) {{
    let e = li + u * {g.threads}u;
    if (e < {chunks}u) {{
      let kk = (e % {per_col}u) * {CHUNK}u; let nn = e / {per_col}u;
      let gn = n0 + nn; let gk = t + kk;
      if (gn < N && gk < K) {{
        let w = chunk(gn, gk / {CHUNK}u);
        let s = scale_of(gn, gk / P.q.x);
{put}
      }} else {{
{zero}
      }}
    }}
  }}"""
    return SGMAT_DIAGNOSTICS + head + finish_fn(e) + sgmat_main(g, stage_a + "\n" + stage_b), roles


def _params(p: QuantMatmulProblem) -> tuple[int, ...]:
    zero = [0, 0, 0, 0]
    return tuple([p.m, p.n, p.k, 1] + p.a.words() + p.out.words()
                 + (p.bias.words() if p.bias else zero) + (p.residual.words() if p.residual else zero)
                 + [f32_word(p.alpha), f32_word(p.beta), 0, 0]
                 + [p.weight.group, p.k // p.weight.group, p.weight.words_per_row(p.k), 0])


def _stream_launch(p: QuantMatmulProblem, e: Epilogue, spec: GemvSpec, caps: DeviceCaps) -> tuple:
    mr = 1 << max(0, (p.m - 1).bit_length())
    src, roles = _stream_source(p, e, spec.lk, spec.ln, spec.unroll, mr,
                                caps.subgroup_size if spec.subgroup else None)
    return src, roles, (ceil_div(p.n, spec.ln), ceil_div(p.m, mr), 1), (spec.threads, 1, 1)


def _sgmat_launch(p: QuantMatmulProblem, e: Epilogue, spec: SgmatSpec, caps: DeviceCaps) -> tuple:
    sg = tensor_core_subgroup_size(caps)
    src, roles = _sgmat_source(p, e, spec, sg, vec8_axis(p.a, p.m, p.k))
    bm, bn = spec.tile
    return src, roles, (ceil_div(p.n, bn), ceil_div(p.m, bm), 1), (spec.sg_m * spec.sg_n * sg, 1, 1)


def _gemv_launch(p: QuantMatmulProblem, e: Epilogue, spec: GemvSpec, caps: DeviceCaps) -> tuple:
    mr = 1 << max(0, (p.m - 1).bit_length())
    src, roles = _gemv_source(p, e, spec.lk, spec.ln, mr)
    return src, roles, (ceil_div(p.n, spec.ln), ceil_div(p.m, mr), 1), (spec.lk, spec.ln, 1)


def _tiled_launch(p: QuantMatmulProblem, e: Epilogue, spec: TiledSpec, caps: DeviceCaps) -> tuple:
    src, roles = _tiled_source(p, e, spec.bm, spec.bn, spec.bk, spec.tm, spec.tn)
    return src, roles, (ceil_div(p.n, spec.bn), ceil_div(p.m, spec.bm), 1), (spec.bn // spec.tn,
                                                                             spec.bm // spec.tm, 1)


# (WGSL, roles, grid, workgroup size) of a variant, by the form of its spec
_SOURCES = {"stream": _stream_launch, "sgmat": _sgmat_launch, "gemv": _gemv_launch, "tiled": _tiled_launch}


def plan_quant_matmul(p: QuantMatmulProblem, caps: DeviceCaps, variant: str | None = None) -> KernelLaunch:
    """The launch of `p` on `caps`; bindings by role: a, q (packed words), scale, out, zero, bias,
    residual."""
    p.check()
    names = quant_variants(p, caps)
    if not names:
        raise TypeError(f"quant matmul: activations {p.dtype} / scales {p.weight.scale_dtype} need the "
                        "adapter feature 'shader-f16'")
    variant = variant or names[0]
    if variant not in names:
        raise ValueError(f"quant matmul variant {variant!r} is not one of {names}")
    e = Epilogue(p.dtype, p.bias is not None, p.residual is not None, p.activation)
    spec = parse_variant(variant).spec
    src, roles, grid, wg = _SOURCES["stream" if getattr(spec, "unroll", 0) else spec.kind](p, e, spec, caps)
    limit = caps.limit("max-compute-workgroups-per-dimension", 65535)
    if max(grid) > limit:
        raise ValueError(f"quant matmul {p.m}x{p.n}x{p.k}: grid {grid} exceeds {limit} workgroups per "
                         "dimension")
    read_only = frozenset(i for i, r in enumerate(roles) if r not in ("out", PARAMS))
    dtypes = p.dtype if p.activation_dtype == p.dtype else f"{p.activation_dtype}to{p.dtype}"
    name = f"qmatmul.{p.weight.fmt}g{p.weight.group}{'z' if p.weight.zero else ''}.{dtypes}.{variant}"
    return KernelLaunch(name=name, wgsl=src, grid=grid, workgroup_size=wg, bindings=tuple(roles),
                        params=_params(p), read_only=read_only)


FAMILY = Family("quant_matmul", quant_variants, single(plan_quant_matmul))


def pack_weight(q: np.ndarray, fmt: str) -> np.ndarray:
    """The u32 words of an [N, K] integer weight in `fmt` ("i8": bytes as stored, "i4": 8 nibbles a word,
    low first); ValueError if a value does not fit the format."""
    q = np.ascontiguousarray(q)
    if q.ndim != 2:
        raise ValueError(f"pack_weight: an [N, K] weight, got shape {q.shape}")
    n, k = q.shape
    per_word = WEIGHT_FORMATS[fmt]
    if k % per_word:
        raise ValueError(f"pack_weight: K={k} is not a multiple of {per_word} ({fmt})")
    lo, hi = (-128, 127) if fmt == "i8" else (-8, 7)
    if q.size and (int(q.min()) < lo or int(q.max()) > hi):
        raise ValueError(f"pack_weight: values outside [{lo}, {hi}] do not fit {fmt}")
    if fmt == "i8":
        return q.astype(np.int8).view(np.uint32).reshape(n, k // 4)
    nib = (q.astype(np.int32) & 0xF).astype(np.uint32).reshape(n, k // 8, 8)
    return np.bitwise_or.reduce(nib << (4 * np.arange(8, dtype=np.uint32)), axis=2)


def pack_bytes(z: np.ndarray) -> np.ndarray:
    """Signed bytes (zero points) as u32 words, zero-padded to whole words."""
    flat = np.ascontiguousarray(z).astype(np.int8).reshape(-1)
    flat = np.concatenate([flat, np.zeros(-flat.size % 4 or (4 if not flat.size else 0), np.int8)])
    return flat.view(np.uint32)


def pack_scales(s: np.ndarray) -> np.ndarray:
    """Scales as a flat array padded to whole u32 words (an f16 array of odd length gets one more)."""
    flat = np.ascontiguousarray(s).reshape(-1)
    if flat.dtype == np.float16 and flat.size % 2:
        flat = np.concatenate([flat, np.zeros(1, np.float16)])
    return flat


def pack_constant(value: np.ndarray, how: dict) -> np.ndarray:
    """A plan constant from the original weight: `how["pack"]` "i4"/"i8" (q, `how["shape"]` [N, K]),
    "bytes" (zero points) or "scales" (torch-free: bundle loaders given external weights use it)."""
    kind = how["pack"]
    if kind in ("i4", "i8"):
        return pack_weight(np.asarray(value).reshape(how["shape"]), kind)
    if kind == "bytes":
        return pack_bytes(value)
    if kind == "scales":
        return pack_scales(value)
    raise ValueError(f"unknown packing {kind!r} (i4, i8, bytes, scales)")


@dataclass(frozen=True)
class GroupedQuantProblem(GroupedProblems):
    """Sibling quantized linears of the same A (M <= GEMV_MAX_ROWS) and weight format, each with its own
    q / scale / zero, written to one output buffer at each problem's `out` layout; no bias or residual."""

    problems: tuple[QuantMatmulProblem, ...]

    def bindings(self) -> int:
        """Storage buffers the grouped kernel binds: A, q/scale(/zero) per problem, the output."""
        return 2 + len(self.problems) * (3 if self.problems[0].weight.zero else 2)

    def check(self) -> None:
        """ValueError naming what the grouped kernel cannot run."""
        first = self.problems[0]
        if not 2 <= len(self.problems) <= 3:
            raise ValueError(f"grouped quant gemv: 2 or 3 problems, got {len(self.problems)}")
        for p in self.problems:
            p.check()
            if p.m > GEMV_MAX_ROWS or p.bias or p.residual:
                raise ValueError(f"grouped quant gemv: at most {GEMV_MAX_ROWS} rows, no bias or residual")
            if (p.m, p.k, p.a, p.weight, p.dtype, p.activation_dtype) != (
                    first.m, first.k, first.a, first.weight, first.dtype, first.activation_dtype):
                raise ValueError("grouped quant gemv: every problem reads the same A with the same weight "
                                 "format")
        if self.glu and (len(self.problems) != 2 or self.problems[1].n != first.n
                         or self.problems[1].activation is not None):
            raise ValueError("grouped quant gemv: the GLU form takes two problems of one N (no activation on "
                             "the second)")


def grouped_quant_variants(gp: GroupedQuantProblem, caps: DeviceCaps) -> list[str]:
    """The streaming variants that run every problem of `gp` in one dispatch on `caps` ([] when none
    can: more bindings than the device's storage buffers per stage — q/k/v with zero points need 11)."""
    try:
        gp.check()
    except (ValueError, TypeError):
        return []
    if gp.bindings() > caps.limit("max-storage-buffers-per-shader-stage", 8):
        return []
    per = [_stream_variants(p, caps) if quant_variants(p, caps) else [] for p in gp.problems]
    limit = caps.limit("max-compute-workgroups-per-dimension", 65535)
    problems = gp.problems[:1] if gp.glu else gp.problems   # the GLU form's grid is one problem's
    return [name for name in per[0] if all(name in other for other in per[1:])
            and sum(ceil_div(p.n, parse_variant(name).spec.ln) for p in problems) <= limit]


def plan_grouped_quant_matmul(gp: GroupedQuantProblem, caps: DeviceCaps,
                              variant: str | None = None) -> KernelLaunch:
    """The one launch of every product of `gp` (bindings: a, q0, scale0[, zero0], q1, ..., out)."""
    gp.check()
    names = grouped_quant_variants(gp, caps)
    if not names:
        raise TypeError(f"grouped quant gemv of {len(gp.problems)} products needs {gp.bindings()} storage "
                        "buffers per stage and whole 16-byte loads; run them one by one")
    variant = variant or names[0]
    if variant not in names:
        raise ValueError(f"grouped quant gemv variant {variant!r} is not one of {names}")
    first = gp.problems[0]
    spec = parse_variant(variant).spec
    lk, ln, unroll = spec.lk, spec.ln, spec.unroll
    mr = 1 << max(0, (first.m - 1).bit_length())
    sg = caps.subgroup_size if spec.subgroup else None
    e = Epilogue(first.dtype, False, False, None)
    src, roles = _stream_source(first, e, lk, ln, unroll, mr, sg,
                                grouped=tuple(p.activation for p in gp.problems), glu=gp.glu)
    w = first.weight
    params = [first.m, 0, first.k, 1] + first.a.words() + [w.group, first.k // w.group,
                                                           w.words_per_row(first.k), 0]
    start = 0
    for p in gp.problems:
        params += [0, 0, 0, 0] + p.out.words() + [start, p.n, f32_word(p.alpha), 0]
        start += ceil_div(p.n, ln)
    if gp.glu:
        start = ceil_div(first.n, ln)
    read_only = frozenset(i for i, r in enumerate(roles) if r not in ("out", PARAMS))
    ta = first.activation_dtype
    dtypes = first.dtype if ta == first.dtype else f"{ta}to{first.dtype}"
    kind = f"gqmatmul{len(gp.problems)}{'glu' if gp.glu else ''}"
    name = f"{kind}.{w.fmt}g{w.group}{'z' if w.zero else ''}.{dtypes}.{variant}"
    return KernelLaunch(name=name, wgsl=src, grid=(start, ceil_div(first.m, mr), 1),
                        workgroup_size=(lk * ln, 1, 1), bindings=tuple(roles),
                        params=tuple(params), read_only=read_only)
