"""Reduction family: sum/mean/prod/amax/amin/any/all/count/argmax/argmin/var/std/norms/logsumexp of a
tensor seen as [outer, length, inner] (contiguous from `offset`), reducing `length`.

Every op is one `OpSpec` (state type, init, accumulate, combine, finish); the kernels are generated from
it. Two or more passes keep every workgroup busy: pass 1 splits each reduced row into chunks (a workgroup
per chunk for inner == 1 with vec4 loads, a thread per (chunk, column) for strided outer reductions) and
writes partial states; pass 2 combines the chunks of each output and finishes. Operands larger than one
storage binding are bound through windows (several pass-1 launches), so every reduction runs up to the
device's max buffer size. Variants: "tree" (workgroup-memory tree) and "subgroup" (butterfly shuffles,
when the device has a fixed subgroup size).

torch-free: storage dtypes are "f32", "f16", "bf16", "i32", "i16", "i8", "u8", "bool", "i64"; float
storage computes in f32 ("f"), integer storage in i32 ("i"; sums/products exactly in int64 pairs),
int64 storage in u32 pairs ("l": exact sums, products, comparisons).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..runtime import BufferSlice, get_runtime
from .launch import PARAMS, DeviceCaps, KernelLaunch, cached_plan, ceil_div, f32_word, grid_within, kernel_of

WG = 256
TARGET_GROUPS = 1024   # enough workgroups to fill a large GPU (132 SMs x 8); chunks stop there
MAX_CHUNKS = 1024
COL_MIN_CHUNK = 32      # elements each thread of a strided (column) reduction reads at least
N_PARAMS = 16

# storage dtype -> (compute kind "f"/"i", elements per u32 word, WGSL of element k of word `w`)
STORAGE: dict[str, tuple[str, int, str]] = {
    "f32": ("f", 1, "bitcast<f32>(w)"),
    "i32": ("i", 1, "bitcast<i32>(w)"),
    "f16": ("f", 2, "unpack2x16float(w)[k]"),
    "bf16": ("f", 2, "bitcast<f32>(((w >> (k * 16u)) & 0xffffu) << 16u)"),
    "i16": ("i", 2, "extractBits(bitcast<i32>(w), k * 16u, 16u)"),
    "i8": ("i", 4, "extractBits(bitcast<i32>(w), k * 8u, 8u)"),
    "u8": ("i", 4, "i32(extractBits(w, k * 8u, 8u))"),
    "bool": ("i", 4, "i32(extractBits(w, k * 8u, 8u))"),
    "i64": ("l", 0, ""),   # two words per element (low, high): loads are special-cased
}
COMPUTE_TYPE = {"f": "f32", "i": "i32", "l": "vec2<u32>"}


def itemsize(dtype: str) -> int:
    """Bytes per element of a storage dtype."""
    return 8 if dtype == "i64" else 4 // STORAGE[dtype][1]


def lanes(dtype: str) -> int:
    """Elements per vec4<u32> load."""
    return 2 if dtype == "i64" else 4 * STORAGE[dtype][1]


HELPERS = """
fn nan_f() -> f32 { var u = 0x7fc00000u; return bitcast<f32>(u); }
fn inf_f() -> f32 { var u = 0x7f800000u; return bitcast<f32>(u); }
fn isnan_f(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn max_f(a: f32, b: f32) -> f32 { if (isnan_f(a) || isnan_f(b)) { return nan_f(); } return max(a, b); }
fn min_f(a: f32, b: f32) -> f32 { if (isnan_f(a) || isnan_f(b)) { return nan_f(); } return min(a, b); }
fn pow_f(a: f32, p: f32) -> f32 {
  if (a == 0.0) { return select(select(0.0, 1.0, p == 0.0), inf_f(), p < 0.0); }
  return exp2(p * log2(a));
}
fn add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let lo = a.x + b.x;
  return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}
fn mul32x32(a: u32, b: u32) -> vec2<u32> {
  let a0 = a & 0xffffu; let a1 = a >> 16u; let b0 = b & 0xffffu; let b1 = b >> 16u;
  let p00 = a0 * b0; let p01 = a0 * b1; let p10 = a1 * b0; let p11 = a1 * b1;
  let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
  return vec2<u32>((p00 & 0xffffu) | (mid << 16u), p11 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u));
}
fn mul64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let lo = mul32x32(a.x, b.x);
  return vec2<u32>(lo.x, lo.y + a.x * b.y + a.y * b.x);
}
fn i64_of(x: i32) -> vec2<u32> { return vec2<u32>(bitcast<u32>(x), select(0u, 0xffffffffu, x < 0)); }
fn lt64(a: vec2<u32>, b: vec2<u32>) -> bool {
  return bitcast<i32>(a.y) < bitcast<i32>(b.y) || (a.y == b.y && a.x < b.x);
}
fn max64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { if (lt64(a, b)) { return b; } return a; }
fn min64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { if (lt64(b, a)) { return b; } return a; }
"""


@dataclass(frozen=True)
class OpSpec:
    """One reduction: state type S (WGSL) of `words` u32 words with pack/unpack, init, acc(s, x, l)
    (x of the compute type, l its global index), comb(s, t), fin(s) -> the output of kind `out`
    ("f32" | "i32" | "u32" | "i64"); `index`: the winning index of s (arg reductions)."""

    state: str
    words: int
    pack: str           # array<u32, words> from s
    unpack: str         # S from array<u32, words> w
    init: str
    acc: str
    comb: str
    fin: str
    out: str
    index: str | None = None
    decl: str = ""


def _scalar(t: str, init: str, acc: str, comb: str, fin: str = "s", out: str | None = None) -> OpSpec:
    pack = "array<u32, 1>(bitcast<u32>(s))" if t != "u32" else "array<u32, 1>(s)"
    unpack = f"bitcast<{t}>(w[0])" if t != "u32" else "w[0]"
    return OpSpec(t, 1, pack, unpack, init, acc, comb, fin, out or ("u32" if t == "u32" else t))


_I64 = dict(state="vec2<u32>", words=2, pack="array<u32, 2>(s.x, s.y)", unpack="vec2<u32>(w[0], w[1])",
            out="i64")

_VI = """
struct VI { v: {T}, i: u32 }
fn vi_acc(s: VI, x: {T}, l: u32) -> VI { if (vi_better(x, l, s)) { return VI(x, l); } return s; }
fn vi_comb(s: VI, t: VI) -> VI { if (vi_better(t.v, t.i, s)) { return t; } return s; }
fn vi_better(x: {T}, xi: u32, s: VI) -> bool {
  if (s.i == 0xffffffffu) { return xi != 0xffffffffu; }
  if (xi == 0xffffffffu) { return false; }
  {nan}
  return x {cmp} s.v || (x == s.v && xi < s.i);
}
"""
_VI_NAN = """if (isnan_f(s.v)) { return isnan_f(x) && xi < s.i; }
  if (isnan_f(x)) { return true; }"""


def _arg(cmp: str, t: str) -> OpSpec:
    # NaN wins (as torch); ties keep the lowest index; i == 0xffffffff marks the empty state
    decl = _VI.replace("{T}", t).replace("{cmp}", cmp).replace("{nan}", _VI_NAN if t == "f32" else "")
    return OpSpec("VI", 2, "array<u32, 2>(bitcast<u32>(s.v), s.i)", f"VI(bitcast<{t}>(w[0]), w[1])",
                  f"VI({t}(0), 0xffffffffu)", "vi_acc(s, x, l)", "vi_comb(s, t)", "s.v", t, index="s.i",
                  decl=decl)


_W = """
struct W { n: f32, m: f32, m2: f32 }
fn w_acc(s: W, x: f32) -> W {
  let n = s.n + 1.0; let d = x - s.m; let m = s.m + d / n;
  return W(n, m, s.m2 + d * (x - m));
}
fn w_comb(s: W, t: W) -> W {
  if (s.n == 0.0) { return t; } if (t.n == 0.0) { return s; }
  let n = s.n + t.n; let d = t.m - s.m;
  return W(n, s.m + d * (t.n / n), s.m2 + t.m2 + d * d * (s.n / n) * t.n);
}
"""
_LSE = """
struct L { m: f32, s: f32 }
fn lse_acc(s: L, x: f32) -> L {
  if (x == -inf_f()) { return s; }
  if (isnan_f(x) || isnan_f(s.m)) { return L(nan_f(), 1.0); }
  if (x > s.m) { return L(x, s.s * exp(s.m - x) + 1.0); }
  return L(s.m, s.s + exp(x - s.m));
}
fn lse_comb(a: L, b: L) -> L {
  if (b.s == 0.0) { return a; } if (a.s == 0.0) { return b; }
  if (isnan_f(a.m) || isnan_f(b.m)) { return L(nan_f(), 1.0); }
  if (a.m >= b.m) { return L(a.m, a.s + b.s * exp(b.m - a.m)); }
  return L(b.m, b.s + a.s * exp(a.m - b.m));
}
fn lse_fin(s: L) -> f32 {
  if (s.s == 0.0) { return -inf_f(); }
  if (isnan_f(s.m) || abs(s.m) == inf_f()) { return s.m; }
  return s.m + log(s.s);
}
"""


def _welford(fin: str) -> OpSpec:
    return OpSpec("W", 3, "array<u32, 3>(bitcast<u32>(s.n), bitcast<u32>(s.m), bitcast<u32>(s.m2))",
                  "W(bitcast<f32>(w[0]), bitcast<f32>(w[1]), bitcast<f32>(w[2]))", "W(0.0, 0.0, 0.0)",
                  "w_acc(s, x)", "w_comb(s, t)", fin, "f32", decl=_W)


_VL = """
struct VL { v: vec2<u32>, i: u32 }
fn vl_better(x: vec2<u32>, xi: u32, s: VL) -> bool {
  if (s.i == 0xffffffffu) { return xi != 0xffffffffu; }
  if (xi == 0xffffffffu) { return false; }
  return {cmp} || (all(x == s.v) && xi < s.i);
}
fn vl_acc(s: VL, x: vec2<u32>, l: u32) -> VL { if (vl_better(x, l, s)) { return VL(x, l); } return s; }
fn vl_comb(s: VL, t: VL) -> VL { if (vl_better(t.v, t.i, s)) { return t; } return s; }
"""


def _arg64(cmp: str) -> OpSpec:
    return OpSpec("VL", 3, "array<u32, 3>(s.v.x, s.v.y, s.i)", "VL(vec2<u32>(w[0], w[1]), w[2])",
                  "VL(vec2<u32>(0u, 0u), 0xffffffffu)", "vl_acc(s, x, l)", "vl_comb(s, t)", "s.v", "i64",
                  index="s.i", decl=_VL.replace("{cmp}", cmp))


_ANY = _scalar("u32", "0u", "s | select(0u, 1u, x != {zero})", "s | t")
_ALL = _scalar("u32", "1u", "s & select(0u, 1u, x != {zero})", "s & t")
_COUNT = OpSpec("u32", 1, "array<u32, 1>(s)", "w[0]", "0u", "s + select(0u, 1u, x != {zero})", "s + t",
                "vec2<u32>(s, 0u)", "i64")

# compute kind "f": elements are f32
FLOAT_OPS: dict[str, OpSpec] = {
    "sum": _scalar("f32", "0.0", "s + x", "s + t"),
    "mean": _scalar("f32", "0.0", "s + x", "s + t", "s / count"),
    "nansum": _scalar("f32", "0.0", "select(s + x, s, isnan_f(x))", "s + t"),
    "prod": _scalar("f32", "1.0", "s * x", "s * t"),
    "amax": _scalar("f32", "-inf_f()", "max_f(s, x)", "max_f(s, t)"),
    "amin": _scalar("f32", "inf_f()", "min_f(s, x)", "min_f(s, t)"),
    "norm1": _scalar("f32", "0.0", "s + abs(x)", "s + t"),
    "norm2": _scalar("f32", "0.0", "fma(x, x, s)", "s + t", "sqrt(s)"),
    "normp": _scalar("f32", "0.0", "s + pow_f(abs(x), scalar)", "s + t", "pow_f(s, 1.0 / scalar)"),
    "norm0": _scalar("f32", "0.0", "s + select(0.0, 1.0, x != 0.0)", "s + t"),
    "norm_inf": _scalar("f32", "0.0", "max_f(s, abs(x))", "max_f(s, t)"),
    "norm_ninf": _scalar("f32", "inf_f()", "min_f(s, abs(x))", "min_f(s, t)"),
    "argmax": _arg(">", "f32"),
    "argmin": _arg("<", "f32"),
    "var": _welford("s.m2 / max(s.n - scalar, 0.0)"),
    "std": _welford("sqrt(s.m2 / max(s.n - scalar, 0.0))"),
    "logsumexp": OpSpec("L", 2, "array<u32, 2>(bitcast<u32>(s.m), bitcast<u32>(s.s))",
                        "L(bitcast<f32>(w[0]), bitcast<f32>(w[1]))", "L(-inf_f(), 0.0)", "lse_acc(s, x)",
                        "lse_comb(s, t)", "lse_fin(s)", "f32", decl=_LSE),
    "any": _ANY, "all": _ALL, "count_nonzero": _COUNT,
}
# compute kind "i": elements are i32; sums and products are exact int64
INT_OPS: dict[str, OpSpec] = {
    "sum": OpSpec(init="vec2<u32>(0u, 0u)", acc="add64(s, i64_of(x))", comb="add64(s, t)", fin="s", **_I64),
    "prod": OpSpec(init="vec2<u32>(1u, 0u)", acc="mul64(s, i64_of(x))", comb="mul64(s, t)", fin="s",
                   **_I64),
    "amax": _scalar("i32", "i32(-2147483647 - 1)", "max(s, x)", "max(s, t)"),
    "amin": _scalar("i32", "2147483647", "min(s, x)", "min(s, t)"),
    "argmax": _arg(">", "i32"),
    "argmin": _arg("<", "i32"),
    "any": _ANY, "all": _ALL, "count_nonzero": _COUNT,
}
# compute kind "l": elements are int64 as vec2<u32> (low, high)
_L64 = dict(state="vec2<u32>", words=2, pack="array<u32, 2>(s.x, s.y)", unpack="vec2<u32>(w[0], w[1])",
            out="i64", fin="s")
INT64_OPS: dict[str, OpSpec] = {
    "sum": OpSpec(init="vec2<u32>(0u, 0u)", acc="add64(s, x)", comb="add64(s, t)", **_L64),
    "prod": OpSpec(init="vec2<u32>(1u, 0u)", acc="mul64(s, x)", comb="mul64(s, t)", **_L64),
    "amax": OpSpec(init="vec2<u32>(0u, 0x80000000u)", acc="max64(s, x)", comb="max64(s, t)", **_L64),
    "amin": OpSpec(init="vec2<u32>(0xffffffffu, 0x7fffffffu)", acc="min64(s, x)", comb="min64(s, t)", **_L64),
    "argmax": _arg64("lt64(s.v, x)"),
    "argmin": _arg64("lt64(x, s.v)"),
    "any": _ANY, "all": _ALL, "count_nonzero": _COUNT,
}
OUT_BYTES = {"f32": 4, "i32": 4, "u32": 4, "i64": 8}
_TABLES = {"f": FLOAT_OPS, "i": INT_OPS, "l": INT64_OPS}
_KIND_NAMES = {"f": "float", "i": "integer", "l": "int64"}


@functools.cache
def op_spec(op: str, compute: str) -> OpSpec:
    """The spec of `op` in compute kind "f", "i" or "l", or a clear error."""
    table = _TABLES[compute]
    if op not in table:
        raise TypeError(f"reduce: '{op}' is not defined for {_KIND_NAMES[compute]} elements "
                        f"(ops: {sorted(table)})")
    spec = table[op]
    nonzero = {"f": "x != 0.0", "i": "x != 0", "l": "any(x != vec2<u32>(0u))"}[compute]
    return dataclasses.replace(spec, acc=spec.acc.replace("x != {zero}", nonzero))


@dataclass(frozen=True)
class ReduceProblem:
    """Reduce x[outer, length, inner] (contiguous from element `offset` of its buffer) over `length`.

    Outputs are row-major [outer, inner] from element 0 of "out" (and of "index" with `with_index`).
    `scalar`: the correction of var/std or p of normp. `compute`: "f" or "i" (default from dtype).
    `x_buffer_bytes`: the size of x's buffer when known (windows never reach past it)."""

    op: str
    dtype: str
    outer: int
    length: int
    inner: int = 1
    offset: int = 0
    compute: str = ""
    scalar: float = 0.0
    with_index: bool = False
    x_buffer_bytes: int = 0

    @property
    def kind(self) -> str:
        """The compute kind ("f" or "i")."""
        return self.compute or STORAGE[self.dtype][0]

    @property
    def spec(self) -> OpSpec:
        """The op's spec in this problem's compute kind."""
        return op_spec(self.op, self.kind)

    def out_bytes(self) -> int:
        """Bytes of the "out" operand."""
        return self.outer * self.inner * OUT_BYTES[self.spec.out]

    def out_dtype(self) -> str:
        """The output element kind ("f32", "i32", "u32" or "i64"; "index" is always i64)."""
        return self.spec.out


@dataclass(frozen=True)
class Step:
    """One dispatch of a plan; `windows[role]` = (byte offset, bytes) of that operand's buffer to bind
    (roles absent bind their whole buffer)."""

    launch: KernelLaunch
    windows: Mapping[str, tuple[int, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class ReducePlan:
    """The dispatches of one reduction, in order, and the scratch buffers (role -> bytes) they need."""

    steps: tuple[Step, ...]
    scratch: Mapping[str, int]


def variants(p: ReduceProblem, caps: DeviceCaps) -> list[str]:
    """Variant names that can run `p` on `caps`, best default first."""
    if p.dtype not in STORAGE:
        raise TypeError(f"reduce: storage dtype {p.dtype!r} is not one of {sorted(STORAGE)}")
    return (["subgroup"] if caps.subgroups else []) + ["tree"]


# ---- WGSL ------------------------------------------------------------------------------------------


def _header(spec: OpSpec, p: ReduceProblem, subgroup: bool) -> str:
    enable = "enable subgroups;\n" if subgroup else ""
    zero_state = spec.state
    return f"""{enable}
struct Params {{ w: array<vec4<u32>, {N_PARAMS // 4}> }}
@group(0) @binding(0) var<uniform> P: Params;
fn prm(k: u32) -> u32 {{ return P.w[k >> 2u][k & 3u]; }}
{HELPERS}
{spec.decl}
fn st_init() -> {zero_state} {{ return {spec.init}; }}
fn st_comb(s: {zero_state}, t: {zero_state}) -> {zero_state} {{ return {spec.comb}; }}
fn st_pack(s: {zero_state}) -> array<u32, {spec.words}> {{ return {spec.pack}; }}
fn st_unpack(w: array<u32, {spec.words}>) -> {zero_state} {{ return {spec.unpack}; }}
"""


def _wg_reduce(spec: OpSpec, subgroup: bool) -> str:
    s = spec.state
    if subgroup:
        shuffle = "\n".join(f"    r[{j}] = subgroupShuffleXor(w[{j}], k);" for j in range(spec.words))
        return f"""
var<workgroup> sh: array<{s}, {WG}>;
fn wg_reduce(s_in: {s}, lid: u32, sg_lane: u32, sg_size: u32) -> {s} {{
  var s = s_in;
  for (var k = sg_size / 2u; k > 0u; k = k >> 1u) {{
    let w = st_pack(s);
    var r: array<u32, {spec.words}>;
{shuffle}
    s = st_comb(s, st_unpack(r));
  }}
  if (sg_lane == 0u) {{ sh[lid / sg_size] = s; }}
  workgroupBarrier();
  var t = sh[0];
  for (var j = 1u; j < {WG}u / sg_size; j++) {{ t = st_comb(t, sh[j]); }}
  return t;
}}
"""
    return f"""
var<workgroup> sh: array<{s}, {WG}>;
fn wg_reduce(s_in: {s}, lid: u32, sg_lane: u32, sg_size: u32) -> {s} {{
  sh[lid] = s_in;
  workgroupBarrier();
  for (var k = {WG // 2}u; k > 0u; k = k >> 1u) {{
    if (lid < k) {{ sh[lid] = st_comb(sh[lid], sh[lid + k]); }}
    workgroupBarrier();
  }}
  return sh[0];
}}
"""


def _final_store(spec: OpSpec, with_index: bool) -> str:
    out = spec.out
    if out == "i64":
        store = "  let v = st_fin(s); O[2u * q] = v.x; O[2u * q + 1u] = v.y;\n"
    elif out == "u32":
        store = "  O[q] = st_fin(s);\n"
    else:
        store = "  O[q] = bitcast<u32>(st_fin(s));\n"
    idx = f"  I[2u * qi] = {spec.index}; I[2u * qi + 1u] = 0u;\n" if with_index else ""
    out_t = {"f32": "f32", "i32": "i32", "u32": "u32", "i64": "vec2<u32>"}[out]
    return f"""
fn st_fin(s: {spec.state}) -> {out_t} {{
  let count = bitcast<f32>(prm(12u)); let scalar = bitcast<f32>(prm(13u));
  return {spec.fin};
}}
fn store_final(q_local: u32, s: {spec.state}) {{
  let q = prm(10u) + q_local;
  let qi = prm(14u) + q_local;
{store}{idx}}}
"""


def _out_decls(spec: OpSpec, final: bool, with_index: bool, first: int) -> str:
    d = f"@group(0) @binding({first}) var<storage, read_write> O: array<u32>;\n"
    if final and with_index:
        d += f"@group(0) @binding({first + 1}) var<storage, read_write> I: array<u32>;\n"
    return d


def _partial_store(spec: OpSpec) -> str:
    stores = "".join(f"  O[{spec.words}u * e + {j}u] = w[{j}];\n" for j in range(spec.words))
    return f"""
fn store_partial(e: u32, s: {spec.state}) {{
  let w = st_pack(s);
{stores}}}
"""


def _element_loads(dtype: str, ct: str, conv: str, elem: str, per_word: int) -> str:
    """WGSL `ld(e)` (element e of X in the compute type) and `elem(word, k)` for vec4 unpacking."""
    if dtype == "i64":
        return "fn ld(e: u32) -> vec2<u32> { return vec2<u32>(X[2u * e], X[2u * e + 1u]); }\n"
    return (f"fn elem(w: u32, k: u32) -> {ct} {{ return {conv}({elem}); }}\n"
            f"fn ld(e: u32) -> {ct} {{ return elem(X[e / {per_word}u], e % {per_word}u); }}\n")


def _pass1_source(p: ReduceProblem, mode: str, vec: bool, final: bool, subgroup: bool) -> str:
    """Pass 1 over x: mode "row" (a workgroup per (row, chunk), inner == 1) or "col" (a thread per
    (row, chunk, column)); writes finished outputs (`final`) or partial states."""
    spec = p.spec
    kind, per_word, elem = STORAGE[p.dtype]
    ct = COMPUTE_TYPE[p.kind]
    if kind == "l" and p.kind != "l":
        raise TypeError(f"reduce: int64 elements reduce exactly only ('{p.op}' in compute kind {p.kind!r})")
    conv = "" if kind == p.kind else ct
    decls = "@group(0) @binding(1) var<storage, read> X: array<u32>;\n"
    if vec:
        decls += "@group(0) @binding(2) var<storage, read> XV: array<vec4<u32>>;\n"
    decls += _out_decls(spec, final, p.with_index, 3 if vec else 2)
    src = _header(spec, p, subgroup) + decls
    src += f"""
{_element_loads(p.dtype, ct, conv, elem, per_word)}
fn acc(s: {spec.state}, x: {ct}, l: u32) -> {spec.state} {{
{"  let scalar = bitcast<f32>(prm(13u));" if "scalar" in spec.acc else ""}
  return {spec.acc};
}}
"""
    src += _final_store(spec, p.with_index) if final else _partial_store(spec)
    store = ("store_final(o * prm(2u) + i, s);" if final else
             "store_partial(((prm(9u) + o) * prm(8u) + prm(7u) + c) * prm(2u) + i, s);")
    sg_params = (", @builtin(subgroup_invocation_id) sg_lane: u32, @builtin(subgroup_size) sg_size: u32"
                 if subgroup else "")
    sg_args = "sg_lane, sg_size" if subgroup else "0u, 1u"
    # params: 0 n_outer, 1 length, 2 inner, 3 x_off, 4 row_stride, 5 chunks per row here, 6 chunk_len,
    # 7 chunk base, 8 chunks per row in all, 9 outer base, 10 out_off, 11 l_base, 12 count, 13 scalar,
    # 14 index_off
    if mode == "col":
        src += f"""
@compute @workgroup_size({WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {{
  let t = (wid.x + wid.y * nwg.x) * {WG}u + lid3.x;
  let inner = prm(2u); let C = prm(5u);
  if (t >= prm(0u) * C * inner) {{ return; }}
  let i = t % inner; let oc = t / inner; let c = oc % C; let o = oc / C;
  let start = c * prm(6u);
  let end = min(start + prm(6u), prm(1u));
  let base = prm(3u) + o * prm(4u) + i;
  let lb = prm(11u);
  var s = st_init();
  for (var l = start; l < end; l++) {{ s = acc(s, ld(base + l * inner), lb + l); }}
  {store}
}}
"""
        return src
    n_l = lanes(p.dtype)
    unpack = []
    for j in range(4):
        for k in range(per_word):
            e = j * per_word + k
            comp = "xyzw"[j]
            unpack.append(f"    s = acc(s, elem(v.{comp}, {k}u), l0 + {e}u);")
    if p.dtype == "i64":
        unpack = ["    s = acc(s, v.xy, l0);", "    s = acc(s, v.zw, l0 + 1u);"]
    body_vec = "\n".join(unpack)
    if vec:
        loop = f"""
    let vs = (row + start) / {n_l}u;
    let nfull = (end - start) / {n_l}u;
    var u = lid;
    for (; u + {WG}u < nfull; u += {2 * WG}u) {{
      let v0 = XV[vs + u];
      let v1 = XV[vs + u + {WG}u];
      {{ let v = v0; let l0 = lb + start + u * {n_l}u;
{body_vec}
      }}
      {{ let v = v1; let l0 = lb + start + (u + {WG}u) * {n_l}u;
{body_vec}
      }}
    }}
    if (u < nfull) {{
      let v = XV[vs + u]; let l0 = lb + start + u * {n_l}u;
{body_vec}
    }}
    for (var l = start + nfull * {n_l}u + lid; l < end; l += {WG}u) {{ s = acc(s, ld(row + l), lb + l); }}
"""
    else:
        loop = f"    for (var l = start + lid; l < end; l += {WG}u) {{ s = acc(s, ld(row + l), lb + l); }}\n"
    src += _wg_reduce(spec, subgroup)
    src += f"""
@compute @workgroup_size({WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>{sg_params}) {{
  let lid = lid3.x;
  let g = wid.x + wid.y * nwg.x;
  let C = prm(5u);
  let live = g < prm(0u) * C;
  let o = g / C; let c = g % C; let i = 0u;
  var s = st_init();
  if (live) {{
    let start = c * prm(6u);
    let end = min(start + prm(6u), prm(1u));
    let row = prm(3u) + o * prm(4u);
    let lb = prm(11u);
{loop}  }}
  s = wg_reduce(s, lid, {sg_args});
  if (lid == 0u && live) {{ {store} }}
}}
"""
    return src


def _combine_source(p: ReduceProblem, per_output_group: bool, subgroup: bool) -> str:
    """Pass 2: combine the chunk states of each output and finish (a workgroup per output when
    inner == 1, else a thread per output)."""
    spec = p.spec
    W = spec.words
    decls = "@group(0) @binding(1) var<storage, read> S: array<u32>;\n" + _out_decls(spec, True,
                                                                                     p.with_index, 2)
    words = ", ".join(f"S[{W}u * e + {j}u]" for j in range(W))
    src = _header(spec, p, subgroup and per_output_group) + decls + _final_store(spec, p.with_index)
    src += f"fn ld_state(e: u32) -> {spec.state} {{ return st_unpack(array<u32, {W}>({words})); }}\n"
    # params: 0 n outputs, 1 chunks, 2 inner, 10 out_off, 12 count, 13 scalar, 14 index_off
    if per_output_group:
        sg_params = (", @builtin(subgroup_invocation_id) sg_lane: u32, @builtin(subgroup_size) sg_size: u32"
                     if subgroup else "")
        sg_args = "sg_lane, sg_size" if subgroup else "0u, 1u"
        src += _wg_reduce(spec, subgroup) + f"""
@compute @workgroup_size({WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>{sg_params}) {{
  let lid = lid3.x;
  let q = wid.x + wid.y * nwg.x;
  let live = q < prm(0u);
  let C = prm(1u);
  var s = st_init();
  if (live) {{ for (var c = lid; c < C; c += {WG}u) {{ s = st_comb(s, ld_state(q * C + c)); }} }}
  s = wg_reduce(s, lid, {sg_args});
  if (lid == 0u && live) {{ store_final(q, s); }}
}}
"""
    else:
        src += f"""
@compute @workgroup_size({WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {{
  let q = (wid.x + wid.y * nwg.x) * {WG}u + lid3.x;
  if (q >= prm(0u)) {{ return; }}
  let inner = prm(2u); let C = prm(1u);
  let o = q / inner; let i = q % inner;
  var s = st_init();
  for (var c = 0u; c < C; c++) {{ s = st_comb(s, ld_state((o * C + c) * inner + i)); }}
  store_final(q, s);
}}
"""
    return src


# ---- planning --------------------------------------------------------------------------------------


def _window(start: int, end: int, align: int, limit: int) -> tuple[int, int]:
    """Byte window [base, base + n) holding [start, end), base aligned down; n rounded to 4, <= limit."""
    base = start - start % align
    n = -(-(end - base) // 4) * 4
    if limit:
        n = min(n, limit - base)
    return base, n


def _chunking(p: ReduceProblem, mode: str, budget: int) -> tuple[int, int]:
    """(chunk_len, chunks per row): enough workgroups for the GPU, chunks that fit one window."""
    if mode == "row":
        unit = lanes(p.dtype)
        min_len = WG * unit * 4
        chunks = 1 if p.outer >= TARGET_GROUPS else min(ceil_div(p.length, min_len),
                                                        ceil_div(TARGET_GROUPS, p.outer), MAX_CHUNKS)
    else:
        unit = 1
        threads = p.outer * p.inner
        chunks = min(ceil_div(p.length, COL_MIN_CHUNK), max(1, TARGET_GROUPS * WG // threads), MAX_CHUNKS)
    chunks = max(1, chunks)
    # a row longer than one binding window is split over windows: chunks must not straddle them
    per_window = max(unit, (budget // p.inner) // 2 // unit * unit)
    chunk_len = -(-ceil_div(p.length, chunks) // unit) * unit
    chunk_len = min(chunk_len, per_window)
    return chunk_len, ceil_div(p.length, chunk_len)


def plan_reduce(p: ReduceProblem, caps: DeviceCaps, variant: str | None = None) -> ReducePlan:
    """The dispatches that reduce `p` on `caps` (`variant`: one of `variants(p, caps)`); memoised.

    Operand roles: "x" and "x_vec4" (both x's buffer), "out", "index" (with_index), scratch
    "partials" (allocated by the caller, `plan.scratch` bytes)."""
    return cached_plan(_plan_reduce, p, caps, variant)


def _plan_reduce(p: ReduceProblem, caps: DeviceCaps, variant: str | None = None) -> ReducePlan:
    """The uncached planner of `plan_reduce`."""
    names = variants(p, caps)
    variant = variant or names[0]
    if variant not in names:
        raise ValueError(f"reduce variant {variant!r} is not one of {names}")
    if p.outer * p.inner == 0:
        return ReducePlan((), {})
    if p.length == 0:
        raise ValueError("reduce: a reduction over zero elements has no kernel (use the op's identity)")
    spec = p.spec
    subgroup = variant == "subgroup"
    item = itemsize(p.dtype)
    max_binding = caps.limit("max-storage-buffer-binding-size", 128 << 20)
    align = max(16, caps.limit("min-storage-buffer-offset-alignment", 256))
    budget = (max_binding - align - 16) // item
    max_groups = caps.limit("max-compute-workgroups-per-dimension", 65535)
    mode = "row" if p.inner == 1 and p.length > 64 else "col"
    chunk_len, chunks = _chunking(p, mode, budget)
    while chunks > 1 and p.outer * chunks * p.inner * spec.words * 4 > max_binding:
        chunk_len *= 2
        chunks = ceil_div(p.length, chunk_len)
    final = chunks == 1
    slab = p.length * p.inner
    vec = (mode == "row" and p.offset % lanes(p.dtype) == 0
           and (p.outer == 1 or slab % lanes(p.dtype) == 0))
    wgsl = _pass1_source(p, mode, vec, final, subgroup)
    name = f"reduce.{p.op}.{p.dtype}.{mode}{'.vec4' if vec else ''}.{variant}{'' if final else '.pass1'}"
    ob = OUT_BYTES[spec.out]
    scalar = f32_word(p.scalar)
    count = f32_word(float(p.length))

    # pass-1 launches: (o0, o1, l0, l1) blocks that each fit one window of x
    if p.outer * slab <= budget:
        blocks = [(0, p.outer, 0, p.length)]
    elif slab <= budget:
        rows = budget // slab
        blocks = [(o, min(o + rows, p.outer), 0, p.length) for o in range(0, p.outer, rows)]
    else:
        span = max(chunk_len, (budget // p.inner) // chunk_len * chunk_len)
        blocks = [(o, o + 1, lo, min(lo + span, p.length)) for o in range(p.outer)
                  for lo in range(0, p.length, span)]
    steps = []
    roles = ([PARAMS, "x"] + (["x_vec4"] if vec else []) + ["out" if final else "partials"]
             + (["index"] if final and p.with_index else []))
    for o0, o1, l0, l1 in blocks:
        first = p.offset + o0 * slab + l0 * p.inner
        last = p.offset + (o1 - 1) * slab + (l1 - 1) * p.inner + p.inner
        xb, xn = _window(first * item, last * item, align, p.x_buffer_bytes)
        windows: dict[str, tuple[int, int]] = {"x": (xb, xn), "x_vec4": (xb, xn // 16 * 16)}
        out_off = idx_off = 0
        if final:
            q0, q1 = o0 * p.inner, o1 * p.inner
            if p.outer * p.inner * ob > max_binding:
                windows["out"] = _window(q0 * ob, q1 * ob, align, 0)
                windows["index"] = _window(q0 * 8, q1 * 8, align, 0)
            out_off = q0 - windows["out"][0] // ob if "out" in windows else q0
            idx_off = q0 - windows["index"][0] // 8 if "index" in windows else q0
        n_outer = o1 - o0
        c_here = ceil_div(l1 - l0, chunk_len)
        params = (n_outer, l1 - l0, p.inner, first - xb // item, slab, c_here, chunk_len, l0 // chunk_len,
                  chunks, o0, out_off, l0, count, scalar, idx_off, 0)
        groups = n_outer * c_here if mode == "row" else ceil_div(n_outer * c_here * p.inner, WG)
        launch = KernelLaunch(name=name, wgsl=wgsl, grid=(*grid_within(groups, max_groups), 1),
                              workgroup_size=(WG, 1, 1), bindings=tuple(roles), params=params,
                              read_only=frozenset({1, 2} if vec else {1}))
        steps.append(Step(launch, windows))
    scratch: dict[str, int] = {}
    if not final:
        scratch["partials"] = p.outer * chunks * p.inner * spec.words * 4
        if p.outer * p.inner * ob > max_binding:
            raise ValueError(f"reduce: {p.outer * p.inner} outputs of a chunked reduction exceed one binding")
        per_group = p.inner == 1
        n_q = p.outer * p.inner
        groups = n_q if per_group else ceil_div(n_q, WG)
        wgsl2 = _combine_source(p, per_group, subgroup)
        roles2 = [PARAMS, "partials", "out"] + (["index"] if p.with_index else [])
        params2 = (n_q, chunks, p.inner, 0, 0, 0, 0, 0, 0, 0, 0, 0, count, scalar, 0, 0)
        steps.append(Step(KernelLaunch(
            name=f"reduce.{p.op}.{p.dtype}.combine.{variant if per_group else 'serial'}", wgsl=wgsl2,
            grid=(*grid_within(groups, max_groups), 1), workgroup_size=(WG, 1, 1), bindings=tuple(roles2),
            params=params2, read_only=frozenset({1}))))
    return ReducePlan(tuple(steps), scratch)


def record_plan(plan: ReducePlan, operands: Mapping[str, int], rt: Any = None) -> None:
    """Record every step of `plan` with `operands[role]` = buffer id (x, out, index and the scratch
    roles; "x_vec4" binds x's buffer); windows become BufferSlices."""
    rt = rt or get_runtime()
    ids = dict(operands)
    ids.setdefault("x_vec4", ids.get("x"))
    for step in plan.steps:
        launch = step.launch
        binds: list[Any] = []
        for role in launch.bindings:
            if role == PARAMS:
                binds.append(rt.constant(launch.params_bytes()))
            elif role in step.windows:
                off, n = step.windows[role]
                binds.append(BufferSlice(ids[role], off, n))
            else:
                binds.append(ids[role])
        rt.dispatch(kernel_of(launch, rt), binds, launch.grid, launch.name)


def bytes_read(p: ReduceProblem) -> int:
    """Bytes of x one reduction reads (for bandwidth figures)."""
    return math.prod((p.outer, p.length, p.inner)) * itemsize(p.dtype)
