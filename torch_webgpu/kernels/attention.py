"""Attention family: out = softmax(scale * Q K^T + mask) V, flash-style (online softmax, no L x S matrix).

One workgroup per (batch*head, block of BQ queries): the query block sits in workgroup memory, K/V tiles
of BK keys stream through it; each query row is 16 threads (one key each for the scores, DV/16 output
columns each for P V), and keeps its running max and sum in registers. Causal (top-left aligned, as
torch's `is_causal`), boolean (True = attend) or additive masks broadcast through their strides, GQA
(fewer K/V heads than query heads), any scale. Storage f32 or f16 (with `shader-f16`), f32 arithmetic.
Rows whose keys are all masked give 0 (as ATen's `_safe_softmax`).

Decode-shaped problems (the queries of one KV head's group fit one row block: one token, GQA) take the
split-K ("flash-decoding") variants instead: a workgroup per (slice of the keys, KV head) whose rows are
the queries of every query head of that KV head (they share each K/V tile), writing unnormalised partial
states (max, sum, P V) to an f32 scratch; a combine pass merges the slices. The split count is the
variant ("split16"), so the autotuner picks it; unused slots hold empty states, so one combine serves all.
"""

from __future__ import annotations

from dataclasses import dataclass

from .family import Family
from .launch import PARAMS, DeviceCaps, KernelLaunch, LaunchPlan, ceil_div, f32_word, grid_within

BK = 16      # keys per tile = threads per query row
MASKS = (None, "bool", "bool32", "additive", "additive_f32")


@dataclass(frozen=True)
class Strided:
    """A [batch, head, row, col] operand: element offset and four strides (0 broadcasts)."""

    offset: int
    strides: tuple[int, int, int, int]

    @staticmethod
    def contiguous(shape: tuple[int, int, int, int], offset: int = 0) -> Strided:
        """Row-major layout of `shape`."""
        _, h, r, c = shape
        return Strided(offset, (h * r * c, r * c, c, 1))


@dataclass(frozen=True)
class AttentionProblem:
    """Q [batch, heads, lq, d], K [batch, kv_heads, lk, d], V [batch, kv_heads, lk, dv] -> out
    [batch, heads, lq, dv]; `mask` [batch, heads, lq, lk] by strides ("bool": stored as bytes, "bool32":
    one u32 word per element as compiled plans store bools,
    "additive": of `dtype`, "additive_f32": f32 whatever `dtype` is); `scale` None means 1/sqrt(d).
    Layouts default to contiguous."""

    batch: int
    heads: int
    lq: int
    lk: int
    d: int
    dv: int | None = None
    kv_heads: int | None = None
    causal: bool = False
    mask: str | None = None
    scale: float | None = None
    dtype: str = "f32"
    q: Strided | None = None
    k: Strided | None = None
    v: Strided | None = None
    out: Strided | None = None
    mask_layout: Strided | None = None

    @property
    def value_dim(self) -> int:
        """DV (defaults to d)."""
        return self.dv or self.d

    @property
    def kv(self) -> int:
        """K/V heads (defaults to heads)."""
        return self.kv_heads or self.heads

    def layouts(self) -> tuple[Strided, Strided, Strided, Strided]:
        """(q, k, v, out) layouts with the contiguous defaults filled in."""
        b, dv = self.batch, self.value_dim
        return (self.q or Strided.contiguous((b, self.heads, self.lq, self.d)),
                self.k or Strided.contiguous((b, self.kv, self.lk, self.d)),
                self.v or Strided.contiguous((b, self.kv, self.lk, dv)),
                self.out or Strided.contiguous((b, self.heads, self.lq, dv)))

    @property
    def flops(self) -> int:
        """Multiply-adds of Q K^T and P V, times two (all keys; causal skips about half)."""
        return 2 * self.batch * self.heads * self.lq * self.lk * (self.d + self.value_dim)

    def shape_class(self) -> str:
        """A coarse key for autotuning."""
        def bucket(x: int) -> int:
            return 1 << max(0, (x - 1).bit_length())
        return f"bh{bucket(self.batch * self.heads)}q{bucket(self.lq)}k{bucket(self.lk)}d{self.d}"

    def check(self) -> None:
        """Raise ValueError/TypeError naming what is inconsistent."""
        if min(self.batch, self.heads, self.lq, self.lk, self.d, self.value_dim, self.kv) <= 0:
            raise ValueError(f"attention: sizes must be positive, got {self}")
        if self.heads % self.kv:
            raise ValueError(f"attention: {self.heads} query heads are not a multiple of {self.kv} kv heads")
        if self.mask not in MASKS:
            raise ValueError(f"attention: mask kind {self.mask!r} is not one of {MASKS}")
        if self.mask is not None and self.mask_layout is None:
            raise ValueError("attention: a mask needs its layout (mask_layout)")
        if self.dtype not in ("f32", "f16"):
            raise TypeError(f"attention: storage dtype {self.dtype!r} is not supported (f32, f16)")


def _shared_floats(p: AttentionProblem, bq: int) -> int:
    return bq * p.d + BK * (p.d + 1) + BK * p.value_dim + 2 * bq * BK


def _source(p: AttentionProblem, bq: int, split: bool = False) -> str:
    """One-pass (rows: queries of one head) or split-K (rows: the queries of every head of one KV head,
    keys: one slice of the KV length, results: unnormalised partial states for `_combine_source`)."""
    t, d, dv = p.dtype, p.d, p.value_dim
    units = ceil_div(dv, BK)
    threads = bq * BK
    kstr = d + 1                         # padded K rows: the 16 threads of a row read distinct banks
    decl = [f"@group(0) @binding(1) var<storage, read> Q: array<{t}>;",
            f"@group(0) @binding(2) var<storage, read> K: array<{t}>;",
            f"@group(0) @binding(3) var<storage, read> V: array<{t}>;",
            f"@group(0) @binding(4) var<storage, read_write> O: array<{t}>;" if not split else
            "@group(0) @binding(4) var<storage, read_write> W: array<f32>;"]
    mask_term = ""
    if p.mask is not None:
        elem = "u32" if p.mask in ("bool", "bool32") else "f32" if p.mask == "additive_f32" else t
        decl.append(f"@group(0) @binding(5) var<storage, read> M: array<{elem}>;")
        at = "P.off2.x + b * P.ms.x + h * P.ms.y + qi * P.ms.z + j * P.ms.w"
        if p.mask == "bool":
            mask_term = (f"      let mi = {at};\n"
                         "      valid = valid && ((M[mi / 4u] >> ((mi % 4u) * 8u)) & 0xffu) != 0u;\n")
        elif p.mask == "bool32":
            mask_term = f"      valid = valid && M[{at}] != 0u;\n"
        else:
            mask_term = f"      if (valid) {{ s = s + f32(M[{at}]); }}\n"
    causal = "      valid = valid && j <= qi;\n" if p.causal else ""
    kend = f"min(lk, q0 + {bq}u)" if p.causal else "lk"
    kstart = "0u"
    if split:   # this workgroup's slice [ks, ke) of the keys (slices are whole tiles)
        kstart, kend = "wid.x * P.sp.x", "min(lk, wid.x * P.sp.x + P.sp.x)"
    zero_o = "".join(f"  var o{u} = 0.0;\n" for u in range(units))
    pv = ""
    for u in range(units):
        col = u * BK
        guard = f"t + {col}u < {dv}u"
        pv += (f"    o{u} = o{u} * alpha;\n"
               f"    if ({guard}) {{ for (var jj = 0u; jj < {BK}u; jj++) {{\n"
               f"      o{u} = fma(Ps[i * {BK}u + jj], Vs[jj * {dv}u + t + {col}u], o{u}); }} }}\n")
    stores = "".join(f"    if (t + {u * BK}u < {dv}u) {{\n"
                     f"      O[obase + (t + {u * BK}u) * P.os.w] = {t}(o{u} * inv);\n    }}\n"
                     for u in range(units))
    if split:
        stores = ("    let wbase = ((wid.x * P.d0.x * heads + b * heads + h) * lq + qi) * " + f"{dv + 2}u;\n"
                  "    if (t == 0u) { W[wbase] = m; W[wbase + 1u] = l; }\n"
                  + "".join(f"    if (t + {u * BK}u < {dv}u) {{ W[wbase + 2u + t + {u * BK}u] = o{u}; }}\n"
                            for u in range(units))
                  # slots this launch's split count leaves unused: empty states (the combine reads them all)
                  + "    if (t == 0u) {\n"
                  "      for (var e = wid.x + P.sp.y; e < P.sp.z; e += P.sp.y) {\n"
                  f"        let xb = ((e * P.d0.x * heads + b * heads + h) * lq + qi) * {dv + 2}u;\n"
                  "        W[xb] = -3.4028234e38; W[xb + 1u] = 0.0;\n      }\n    }\n")
    enable = "enable f16;\n" if t == "f16" else ""
    split_params = "\n  sp: vec4<u32>,     // keys per split, splits, partial slots, -" if split else ""
    finish = ("" if split else "    let inv = select(0.0, 1.0 / l, l > 0.0);\n"
              "    let obase = P.off.w + b * P.os.x + h * P.os.y + qi * P.os.z;\n")
    if split:   # row r of kv head hk: query head hk * groups + r / lq, query r % lq (the group shares K/V)
        rows = ("  let kvh = P.d0.z; let groups = P.d1.w; let nrows = groups * lq;\n"
                "  let bh = wid.z; let b = bh / kvh; let hk = bh % kvh;\n"
                f"  let q0 = wid.y * {bq}u;\n"
                f"  let row = q0 + lid / {BK}u; let live = row < nrows;\n"
                "  let h = hk * groups + min(row, nrows - 1u) / lq; let qi = row % lq;")
        qat = "P.off.x + b * P.qs.x + (hk * groups + r / lq) * P.qs.y + (r % lq) * P.qs.z + "
    else:
        rows = ("  let bh = wid.y; let b = bh / heads; let h = bh % heads; let hk = h / P.d1.w;\n"
                f"  let q0 = wid.x * {bq}u; let nrows = lq;\n"
                f"  let qi = q0 + lid / {BK}u; let live = qi < lq;")
        qat = "P.off.x + b * P.qs.x + h * P.qs.y + r * P.qs.z + "
    return f"""{enable}struct Params {{
  d0: vec4<u32>,    // batch, heads, kv heads, lq
  d1: vec4<u32>,    // lk, d, dv, heads per kv head
  off: vec4<u32>,   // offsets of q, k, v, out
  off2: vec4<u32>,  // mask offset, -, -, scale (f32 bits)
  qs: vec4<u32>, ks: vec4<u32>, vs: vec4<u32>, os: vec4<u32>, ms: vec4<u32>,{split_params}
}}
@group(0) @binding(0) var<uniform> P: Params;
{chr(10).join(decl)}
var<workgroup> Qs: array<f32, {bq * d}>;
var<workgroup> Ks: array<f32, {BK * kstr}>;
var<workgroup> Vs: array<f32, {BK * dv}>;
var<workgroup> Ss: array<f32, {bq * BK}>;
var<workgroup> Ps: array<f32, {bq * BK}>;
@compute @workgroup_size({threads})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
  let heads = P.d0.y; let lq = P.d0.w; let lk = P.d1.x;
{rows}
  let i = lid / {BK}u; let t = lid % {BK}u;
  let scale = bitcast<f32>(P.off2.w);
  let kbase = P.off.y + b * P.ks.x + hk * P.ks.y;
  let vbase = P.off.z + b * P.vs.x + hk * P.vs.y;
  for (var e = lid; e < {bq * d}u; e += {threads}u) {{
    let r = q0 + e / {d}u;
    var x = 0.0;
    if (r < nrows) {{ x = f32(Q[{qat}(e % {d}u) * P.qs.w]) * scale; }}
    Qs[e] = x;
  }}
  var m = -3.4028234e38;   // finite "minus infinity": exp(m - m_new) stays 0 or 1, never NaN
  var l = 0.0;
{zero_o}  let kend = {kend};
  for (var kb = {kstart}; kb < kend; kb += {BK}u) {{
    workgroupBarrier();
    for (var e = lid; e < {BK * d}u; e += {threads}u) {{
      let j = kb + e / {d}u;
      var x = 0.0;
      if (j < lk) {{ x = f32(K[kbase + j * P.ks.z + (e % {d}u) * P.ks.w]); }}
      Ks[(e / {d}u) * {kstr}u + e % {d}u] = x;
    }}
    for (var e = lid; e < {BK * dv}u; e += {threads}u) {{
      let j = kb + e / {dv}u;
      var x = 0.0;
      if (j < lk) {{ x = f32(V[vbase + j * P.vs.z + (e % {dv}u) * P.vs.w]); }}
      Vs[e] = x;
    }}
    workgroupBarrier();
    let j = kb + t;
    var s = 0.0;
    for (var c = 0u; c < {d}u; c++) {{ s = fma(Qs[i * {d}u + c], Ks[t * {kstr}u + c], s); }}
    var valid = j < lk && live;
{causal}{mask_term}    Ss[i * {BK}u + t] = select(-3.4028234e38, s, valid);
    workgroupBarrier();
    var mb = -3.4028234e38;
    for (var jj = 0u; jj < {BK}u; jj++) {{ mb = max(mb, Ss[i * {BK}u + jj]); }}
    let m_new = max(m, mb);
    let alpha = exp(m - m_new);
    Ps[i * {BK}u + t] = select(0.0, exp(s - m_new), valid);
    workgroupBarrier();
    var rowsum = 0.0;
    for (var jj = 0u; jj < {BK}u; jj++) {{ rowsum += Ps[i * {BK}u + jj]; }}
    l = l * alpha + rowsum;
{pv}    m = m_new;
  }}
  if (live) {{
{finish}{stores}  }}
}}
"""


def _params(p: AttentionProblem) -> tuple[int, ...]:
    q, k, v, o = p.layouts()
    ml = p.mask_layout or Strided(0, (0, 0, 0, 0))
    scale = p.scale if p.scale is not None else p.d ** -0.5
    return (p.batch, p.heads, p.kv, p.lq, p.lk, p.d, p.value_dim, p.heads // p.kv,
            q.offset, k.offset, v.offset, o.offset, ml.offset, 0, 0, f32_word(scale),
            *q.strides, *k.strides, *v.strides, *o.strides, *ml.strides)


QUERY_BLOCKS = {"q32": 32, "q16": 16, "q8": 8}
_BUSY_WORKGROUPS = 128   # about one per SM of a large GPU
SPLIT_ROWS = (4, 8, 16)            # row blocks of the split-K variants (rows: the heads of a KV group)
SPLIT_COUNTS = (2, 4, 8, 16, 32)   # KV slices of the split-K variants ("split<count>")
COMBINE_THREADS = 64


def split_applies(p: AttentionProblem) -> bool:
    """Decode-shaped (every query of a KV head's group fits one row block, more than one key tile): the
    split-K ("flash-decoding") variants run it, several workgroups per KV head each over a slice of the
    keys, then a combine pass."""
    return p.heads % p.kv == 0 and (p.heads // p.kv) * p.lq <= SPLIT_ROWS[-1] and p.lk > BK


def _split_counts(p: AttentionProblem) -> list[int]:
    tiles = ceil_div(p.lk, BK)
    return [c for c in SPLIT_COUNTS if c <= tiles] or [1]


def partial_slots(p: AttentionProblem) -> int:
    """Partial states per query row the combine reads (the largest split count; fewer splits fill the
    other slots with empty states, so every split variant shares one combine)."""
    return max(_split_counts(p))


def partials_bytes(p: AttentionProblem) -> int:
    """Bytes of the f32 scratch the split-K pass writes: per slot and query row (max, sum, DV outputs)."""
    return partial_slots(p) * p.batch * p.heads * p.lq * (p.value_dim + 2) * 4


def _split_rows(p: AttentionProblem) -> int:
    rows = (p.heads // p.kv) * p.lq
    return next(r for r in SPLIT_ROWS if r >= rows)


def _params(p: AttentionProblem, split: int = 0) -> tuple[int, ...]:
    q, k, v, o = p.layouts()
    ml = p.mask_layout or Strided(0, (0, 0, 0, 0))
    scale = p.scale if p.scale is not None else p.d ** -0.5
    words = (p.batch, p.heads, p.kv, p.lq, p.lk, p.d, p.value_dim, p.heads // p.kv,
             q.offset, k.offset, v.offset, o.offset, ml.offset, 0, 0, f32_word(scale),
             *q.strides, *k.strides, *v.strides, *o.strides, *ml.strides)
    if split:
        chunk = ceil_div(ceil_div(p.lk, BK), split) * BK
        words += (chunk, split, partial_slots(p), 0)
    return words


def variants(p: AttentionProblem, caps: DeviceCaps) -> list[str]:
    """Variant names that can run `p` on `caps`, best default first: one-pass query blocks ("q32", larger
    ones reuse K/V more), or for decode-shaped problems (`split_applies`) the split-K counts ("split8")."""
    if p.dtype == "f16" and not caps.shader_f16:
        return []
    threads = caps.limit("max-compute-invocations-per-workgroup", 256)
    shared = caps.limit("max-compute-workgroup-storage-size", 16384)
    if split_applies(p):
        bq = _split_rows(p)
        if bq * BK > threads or _shared_floats(p, bq) * 4 > shared:
            return []
        counts = _split_counts(p)
        # the fewest slices that give a large GPU enough workgroups, else the most slices
        busy = [c for c in counts if c * p.batch * p.kv >= _BUSY_WORKGROUPS]
        first = busy[0] if busy and caps.architecture != "software" else counts[-1]
        return [f"split{first}"] + [f"split{c}" for c in counts if c != first]
    names = [n for n, bq in QUERY_BLOCKS.items()
             if bq * BK <= threads and _shared_floats(p, bq) * 4 <= shared]
    if not names or caps.architecture == "software":
        return names
    # the largest query block that still gives a large GPU enough workgroups, else the most workgroups
    blocks = [ceil_div(p.lq, QUERY_BLOCKS[n]) * p.batch * p.heads for n in names]
    first = next((n for n, wg in zip(names, blocks, strict=True) if wg >= _BUSY_WORKGROUPS), names[-1])
    return [first] + [n for n in names if n != first]


def _combine_source(p: AttentionProblem) -> str:
    t, dv = p.dtype, p.value_dim
    enable = "enable f16;\n" if t == "f16" else ""
    return f"""{enable}struct Params {{
  d0: vec4<u32>,    // rows (batch * heads * lq), heads, lq, partial slots
  off: vec4<u32>,   // out offset, -, -, -
  os: vec4<u32>,    // out strides
}}
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> W: array<f32>;
@group(0) @binding(2) var<storage, read_write> O: array<{t}>;
@compute @workgroup_size({COMBINE_THREADS})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {{
  let e = (wid.y * nwg.x + wid.x) * {COMBINE_THREADS}u + lid;
  let rows = P.d0.x; let heads = P.d0.y; let lq = P.d0.z; let slots = P.d0.w;
  if (e >= rows * {dv}u) {{ return; }}
  let row = e / {dv}u; let c = e % {dv}u;
  var mx = -3.4028234e38;
  for (var s = 0u; s < slots; s++) {{
    let base = (s * rows + row) * {dv + 2}u;
    if (W[base + 1u] > 0.0) {{ mx = max(mx, W[base]); }}
  }}
  var l = 0.0;
  var o = 0.0;
  for (var s = 0u; s < slots; s++) {{
    let base = (s * rows + row) * {dv + 2}u;
    if (W[base + 1u] > 0.0) {{
      let w = exp(W[base] - mx);
      l = fma(W[base + 1u], w, l);
      o = fma(W[base + 2u + c], w, o);
    }}
  }}
  let b = row / (heads * lq); let h = (row / lq) % heads; let qi = row % lq;
  O[P.off.x + b * P.os.x + h * P.os.y + qi * P.os.z + c * P.os.w] = {t}(select(0.0, o / l, l > 0.0));
}}
"""


def plan_attention_combine(p: AttentionProblem, caps: DeviceCaps) -> KernelLaunch:
    """The combine pass after a split-K variant of `p`: roles params, "partials" (its scratch), "out"."""
    rows = p.batch * p.heads * p.lq
    o = p.layouts()[3]
    grid = grid_within(ceil_div(rows * p.value_dim, COMBINE_THREADS),
                       caps.limit("max-compute-workgroups-per-dimension", 65535))
    return KernelLaunch(name=f"attention.{p.dtype}.combine", wgsl=_combine_source(p), grid=(*grid, 1),
                        workgroup_size=(COMBINE_THREADS, 1, 1), bindings=(PARAMS, "partials", "out"),
                        params=(rows, p.heads, p.lq, partial_slots(p), o.offset, 0, 0, 0, *o.strides),
                        read_only=frozenset({1}))


def plan_attention(p: AttentionProblem, caps: DeviceCaps, variant: str | None = None) -> KernelLaunch:
    """The launch of `p` on `caps` (`variant`: one of `variants(p, caps)`, default the first). A split-K
    variant writes "partials" (`partials_bytes(p)` of scratch) instead of "out":
    `plan_attention_combine` then finishes it."""
    p.check()
    if p.dtype == "f16" and not caps.shader_f16:
        raise TypeError(f"attention: dtype {p.dtype} needs the adapter feature 'shader-f16'")
    names = variants(p, caps)
    if not names:
        raise ValueError(f"attention: head dims d={p.d}, dv={p.value_dim} need more workgroup memory than "
                         "the device offers; use the math path (matmul + softmax)")
    variant = variant or names[0]
    if variant not in names:
        raise ValueError(f"attention variant {variant!r} is not one of {names}")
    limit = caps.limit("max-compute-workgroups-per-dimension", 65535)
    split = variant.startswith("split")
    if p.batch * (p.kv if split else p.heads) > limit:
        raise ValueError(f"attention: batch*heads={p.batch * p.heads} exceeds the device's workgroup grid")
    masks = ["mask"] if p.mask is not None else []
    if split:
        count, bq = int(variant[len("split"):]), _split_rows(p)
        roles = [PARAMS, "q", "k", "v", "partials"] + masks
        grid = (count, ceil_div((p.heads // p.kv) * p.lq, bq), p.batch * p.kv)
        params = _params(p, count)
    else:
        bq = QUERY_BLOCKS[variant]
        roles = [PARAMS, "q", "k", "v", "out"] + masks
        grid, params = (ceil_div(p.lq, bq), p.batch * p.heads, 1), _params(p)
    read_only = frozenset(i for i, r in enumerate(roles) if r not in ("out", "partials", PARAMS))
    return KernelLaunch(name=f"attention.{p.dtype}.{variant}" + (".causal" if p.causal else ""),
                        wgsl=_source(p, bq, split), grid=grid,
                        workgroup_size=(bq * BK, 1, 1), bindings=tuple(roles), params=params,
                        read_only=read_only)


def plan_attention_steps(p: AttentionProblem, caps: DeviceCaps, variant: str | None = None) -> LaunchPlan:
    """The dispatches of `variant`: its launch, and for a split-K one the combine pass, which share the
    scratch "partials"."""
    launch = plan_attention(p, caps, variant)
    if "partials" in launch.bindings:
        return LaunchPlan((launch, plan_attention_combine(p, caps)), {"partials": partials_bytes(p)})
    return LaunchPlan((launch,))


FAMILY = Family("attention", variants, plan_attention_steps)

__all__ = ["AttentionProblem", "Strided", "MASKS", "QUERY_BLOCKS", "SPLIT_COUNTS", "variants",
           "plan_attention", "plan_attention_combine", "plan_attention_steps", "split_applies",
           "partial_slots", "partials_bytes", "FAMILY"]
