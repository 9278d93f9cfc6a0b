"""Attention family: out = softmax(scale * Q K^T + mask) V, flash-style (online softmax, no L x S matrix).

One workgroup per (batch*head, block of BQ queries): the query block sits in workgroup memory, K/V tiles
of BK keys stream through it; each query row is 16 threads (one key each for the scores, DV/16 output
columns each for P V), and keeps its running max and sum in registers. Causal (top-left aligned, as
torch's `is_causal`), boolean (True = attend) or additive masks broadcast through their strides, GQA
(fewer K/V heads than query heads), any scale. Storage f32 or f16 (with `shader-f16`), f32 arithmetic.
Rows whose keys are all masked give 0 (as ATen's `_safe_softmax`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .launch import PARAMS, DeviceCaps, KernelLaunch, ceil_div, f32_word

BK = 16      # keys per tile = threads per query row
MASKS = (None, "bool", "bool32", "additive")


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
    "additive": of `dtype`); `scale` None means 1/sqrt(d). Layouts default to contiguous."""

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


def _source(p: AttentionProblem, bq: int) -> str:
    t, d, dv = p.dtype, p.d, p.value_dim
    units = ceil_div(dv, BK)
    threads = bq * BK
    kstr = d + 1                         # padded K rows: the 16 threads of a row read distinct banks
    decl = [f"@group(0) @binding(1) var<storage, read> Q: array<{t}>;",
            f"@group(0) @binding(2) var<storage, read> K: array<{t}>;",
            f"@group(0) @binding(3) var<storage, read> V: array<{t}>;",
            f"@group(0) @binding(4) var<storage, read_write> O: array<{t}>;"]
    mask_term = ""
    if p.mask is not None:
        elem = "u32" if p.mask in ("bool", "bool32") else t
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
    enable = "enable f16;\n" if t == "f16" else ""
    return f"""{enable}struct Params {{
  d0: vec4<u32>,    // batch, heads, kv heads, lq
  d1: vec4<u32>,    // lk, d, dv, heads per kv head
  off: vec4<u32>,   // offsets of q, k, v, out
  off2: vec4<u32>,  // mask offset, -, -, scale (f32 bits)
  qs: vec4<u32>, ks: vec4<u32>, vs: vec4<u32>, os: vec4<u32>, ms: vec4<u32>,
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
  let bh = wid.y; let b = bh / heads; let h = bh % heads; let hk = h / P.d1.w;
  let q0 = wid.x * {bq}u;
  let i = lid / {BK}u; let t = lid % {BK}u;
  let qi = q0 + i;
  let scale = bitcast<f32>(P.off2.w);
  let qbase = P.off.x + b * P.qs.x + h * P.qs.y;
  let kbase = P.off.y + b * P.ks.x + hk * P.ks.y;
  let vbase = P.off.z + b * P.vs.x + hk * P.vs.y;
  for (var e = lid; e < {bq * d}u; e += {threads}u) {{
    let r = q0 + e / {d}u;
    var x = 0.0;
    if (r < lq) {{ x = f32(Q[qbase + r * P.qs.z + (e % {d}u) * P.qs.w]) * scale; }}
    Qs[e] = x;
  }}
  var m = -3.4028234e38;   // finite "minus infinity": exp(m - m_new) stays 0 or 1, never NaN
  var l = 0.0;
{zero_o}  let kend = {kend};
  for (var kb = 0u; kb < kend; kb += {BK}u) {{
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
    var valid = j < lk && qi < lq;
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
  if (qi < lq) {{
    let inv = select(0.0, 1.0 / l, l > 0.0);
    let obase = P.off.w + b * P.os.x + h * P.os.y + qi * P.os.z;
{stores}  }}
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


def variants(p: AttentionProblem, caps: DeviceCaps) -> list[str]:
    """Variant names that can run `p` on `caps`, best default first (larger query blocks reuse K/V more)."""
    if p.dtype == "f16" and not caps.shader_f16:
        return []
    threads = caps.limit("max-compute-invocations-per-workgroup", 256)
    shared = caps.limit("max-compute-workgroup-storage-size", 16384)
    names = [n for n, bq in QUERY_BLOCKS.items()
             if bq * BK <= threads and _shared_floats(p, bq) * 4 <= shared]
    if not names or caps.architecture == "software":
        return names
    # the largest query block that still gives a large GPU enough workgroups, else the most workgroups
    blocks = [ceil_div(p.lq, QUERY_BLOCKS[n]) * p.batch * p.heads for n in names]
    first = next((n for n, wg in zip(names, blocks, strict=True) if wg >= _BUSY_WORKGROUPS), names[-1])
    return [first] + [n for n in names if n != first]


def plan_attention(p: AttentionProblem, caps: DeviceCaps, variant: str | None = None) -> KernelLaunch:
    """The launch of `p` on `caps` (`variant`: one of `variants(p, caps)`, default the first)."""
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
    bq = QUERY_BLOCKS[variant]
    if p.batch * p.heads > caps.limit("max-compute-workgroups-per-dimension", 65535):
        raise ValueError(f"attention: batch*heads={p.batch * p.heads} exceeds the device's workgroup grid")
    roles = [PARAMS, "q", "k", "v", "out"] + (["mask"] if p.mask is not None else [])
    read_only = frozenset(i for i, r in enumerate(roles) if r not in ("out", PARAMS))
    return KernelLaunch(name=f"attention.{p.dtype}.{variant}" + (".causal" if p.causal else ""),
                        wgsl=_source(p, bq), grid=(ceil_div(p.lq, bq), p.batch * p.heads, 1),
                        workgroup_size=(bq * BK, 1, 1), bindings=tuple(roles), params=_params(p),
                        read_only=read_only)


__all__ = ["AttentionProblem", "Strided", "MASKS", "QUERY_BLOCKS", "variants", "plan_attention"]
