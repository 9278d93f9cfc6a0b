"""Row kernels: softmax, log_softmax, layer_norm (weight, bias) and rms_norm (weight) of x[rows, n]
(rows `row_stride` apart from element `offset`, each row contiguous), writing out[rows, n] (f32, or f16
with `out_dtype` "f16" where loads are vec4); and the
softmax/log_softmax backwards (x = the forward's output, "grad" = its gradient, laid out likewise).

One workgroup per row; a row of up to `CACHE_UNITS` loads per thread is held in registers (one read of
x), longer rows stream. Rows that are few and very long take two passes: chunk statistics (max and
sum of exps, Welford moments, sum of squares), then every chunk's workgroup combines its row's
statistics and normalises its chunk. Loads are vec4 when the row layout allows. Statistics (layer_norm
mean/rstd, rms_norm rstd) go to `stats` [2, rows] when asked.

The strided variant (`StridedRowProblem`) runs a row op along any dim of tensors of up to 9 dims, each
of x, grad and out through its own offset and strides (transposed or sliced views need no copy): one
64-wide workgroup per row, f32 out; what the eager device runs where rows are not unit-stride.

torch-free: dtypes "f32", "f16", "bf16".
"""

from __future__ import annotations

from dataclasses import dataclass

from .family import Family
from .launch import (
    PARAMS,
    DeviceCaps,
    KernelLaunch,
    LaunchPlan,
    cached_plan,
    ceil_div,
    f32_word,
    grid_within,
    record,
)
from .reduce import HELPERS, TARGET_GROUPS
from .wgsl import PRELUDE, load_fn

OPS = ("softmax", "log_softmax", "layer_norm", "rms_norm", "softmax_backward", "log_softmax_backward")
CACHE_UNITS = 8           # loads per thread kept in registers
MULTIPASS_MIN_N = 65536   # rows at least this long and too few to fill the GPU take two passes
CHUNK = 16384             # elements per workgroup in the two-pass path


@dataclass(frozen=True)
class RowProblem:
    """One row op. `weight`/`bias`: present (same dtype as x, contiguous n elements) or not."""

    op: str
    dtype: str
    rows: int
    n: int
    offset: int = 0
    row_stride: int = -1      # default n
    eps: float = 1e-5
    weight: bool = False
    bias: bool = False
    stats: bool = False
    grad_offset: int = 0        # backwards: where the gradient's rows are
    grad_row_stride: int = -1
    out_dtype: str = "f32"      # "f16": stored as f16 (vec4 rows only; compiled f16 graphs)

    @property
    def backward(self) -> bool:
        """A softmax/log_softmax backward (reads "grad" beside x)."""
        return self.op.endswith("_backward")

    @property
    def grad_stride(self) -> int:
        """Elements between the gradient's rows."""
        return self.n if self.grad_row_stride < 0 else self.grad_row_stride

    @property
    def stride(self) -> int:
        """Elements between rows."""
        return self.n if self.row_stride < 0 else self.row_stride

    def shape_class(self) -> str:
        """A coarse autotuning key: the op, power-of-two buckets of rows and n, vec4 or not."""
        def bucket(x: int) -> int:
            return 1 << max(0, (x - 1).bit_length())
        out = "" if self.out_dtype == "f32" else f".o{self.out_dtype}"
        return f"{self.op}.r{bucket(self.rows)}n{bucket(self.n)}u{_unit(self)}{out}"

    @property
    def flops(self) -> int:
        """Work for the autotuner's size threshold: these kernels are bandwidth-bound, so 8 per byte
        moved (an f32 read and write per element)."""
        return 64 * self.rows * self.n


RowPlan = LaunchPlan   # the dispatches of one row op and its scratch (role -> bytes)


def variants(p: RowProblem, caps: DeviceCaps) -> list[str]:
    """Variant names that can run `p`, best default first: "wg<threads>.<tree|sg>" — threads per row's
    workgroup, and how a workgroup combines its threads' statistics (a workgroup-memory tree, or
    subgroup shuffles then one value per subgroup)."""
    if p.op not in OPS:
        raise ValueError(f"rows: unknown op {p.op!r} (one of {OPS})")
    if p.dtype not in ("f32", "f16", "bf16"):
        raise TypeError(f"rows: '{p.op}' needs a float dtype, got {p.dtype}")
    if p.out_dtype not in ("f32", "f16") or (p.out_dtype == "f16" and _unit(p) != 4):
        raise ValueError(f"rows: '{p.op}' stores f32, or f16 when rows are vec4 (n, offset and row stride "
                         f"multiples of 4), not {p.out_dtype} for n={p.n}; store f32 and narrow it")
    if p.rows == 0 or p.n == 0 or _multipass(p):
        return ["workgroup"]
    nu = p.n // _unit(p)
    max_wg = caps.limit("max-compute-invocations-per-workgroup", 256)
    default = min(256, max_wg) if nu > 512 else 64
    sizes = [default] + [w for w in (128, 256, 512, 1024)
                         if w != default and w <= max_wg and w <= max(64, nu)
                         and ceil_div(nu, w) <= CACHE_UNITS]
    sg = caps.subgroup_size if caps.subgroups else None
    # H200, 8192x4096 f32 (benchmarks/results/h200-2026-12-01-bandwidth-library.json): 128 and 256 threads
    # with the tree within 5% of each other and of subgroup shuffles; 512 and 1024 threads slower
    names = []
    for w in sizes:
        names.append(f"wg{w}.tree")
        if sg and w % sg == 0:
            names.append(f"wg{w}.sg")
    return names


def _multipass(p: RowProblem) -> bool:
    return p.n >= MULTIPASS_MIN_N and p.rows < TARGET_GROUPS // 4


def _unit(p: RowProblem) -> int:
    """Elements per load unit: 4 (vec4) when every row start and stride allows."""
    vec = p.n % 4 == 0 and p.offset % 4 == 0 and p.stride % 4 == 0 and (
        not p.backward or (p.grad_offset % 4 == 0 and p.grad_stride % 4 == 0))
    return 4 if vec else 1


def _loads(dtype: str, vec: bool, name: str, buf: str) -> str:
    """WGSL `{name}(e)` -> element e (scalar) or elements 4e..4e+3 (vec) of buffer `buf` as f32."""
    if dtype == "f32":
        return (f"fn {name}(e: u32) -> vec4<f32> {{ return {buf}V[e]; }}\n" if vec else
                f"fn {name}(e: u32) -> f32 {{ return {buf}[e]; }}\n")
    if dtype == "f16":
        if vec:
            return (f"fn {name}(e: u32) -> vec4<f32> {{ let w = {buf}V[e]; "
                    f"return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y)); }}\n")
        return f"fn {name}(e: u32) -> f32 {{ return unpack2x16float({buf}[e / 2u])[e % 2u]; }}\n"
    if vec:
        return (f"fn {name}(e: u32) -> vec4<f32> {{ let w2 = {buf}V[e]; "
                f"return vec4<f32>(bf(w2.x, 0u), bf(w2.x, 1u), bf(w2.y, 0u), bf(w2.y, 1u)); }}\n")
    return f"fn {name}(e: u32) -> f32 {{ return bf({buf}[e / 2u], e % 2u); }}\n"


_BF16 = "fn bf(w: u32, k: u32) -> f32 { return bitcast<f32>(((w >> (k * 16u)) & 0xffffu) << 16u); }\n"


def _decl(dtype: str, vec: bool, binding: int, buf: str) -> str:
    if vec:
        t = "vec4<f32>" if dtype == "f32" else "vec2<u32>"
        return f"@group(0) @binding({binding}) var<storage, read> {buf}V: array<{t}>;\n"
    t = "f32" if dtype == "f32" else "u32"
    return f"@group(0) @binding({binding}) var<storage, read> {buf}: array<{t}>;\n"


# per op: statistics from cached/streamed values; `T` is the unit type (f32 or vec4<f32>)
# stats of a row: (a, b): softmax (max, sum of exp(x - max)); layer_norm (mean, rstd); rms (0, rstd)
_STATE = {"softmax": "ML", "log_softmax": "ML", "layer_norm": "WF", "rms_norm": "SQ",
          "softmax_backward": "SQ", "log_softmax_backward": "SQ"}
_STATES = """
struct ML { m: f32, s: f32 }
fn ml_comb(a: ML, b: ML) -> ML {
  if (b.s == 0.0) { return a; } if (a.s == 0.0) { return b; }
  if (isnan_f(a.m) || isnan_f(b.m)) { return ML(nan_f(), 1.0); }
  let m = max(a.m, b.m);
  return ML(m, a.s * exp(a.m - m) + b.s * exp(b.m - m));
}
struct WF { n: f32, m: f32, m2: f32 }
fn wf_comb(s: WF, t: WF) -> WF {
  if (s.n == 0.0) { return t; } if (t.n == 0.0) { return s; }
  let n = s.n + t.n; let d = t.m - s.m;
  return WF(n, s.m + d * (t.n / n), s.m2 + t.m2 + d * d * (s.n / n) * t.n);
}
struct SQ { s: f32 }
fn sq_comb(a: SQ, b: SQ) -> SQ { return SQ(a.s + b.s); }
"""
_COMB = {"ML": "ml_comb", "WF": "wf_comb", "SQ": "sq_comb"}
_WORDS = {"ML": 2, "WF": 3, "SQ": 1}


_FIELDS = {"ML": ("m", "s"), "WF": ("n", "m", "m2"), "SQ": ("s",)}


def _tree_comb(st: str, comb: str, wg: int) -> str:
    """WGSL wg_comb: every thread's statistics combined through a workgroup-memory tree."""
    return f"""
var<workgroup> sh: array<{st}, {wg}>;
fn wg_comb(v: {st}, lid: u32) -> {st} {{
  sh[lid] = v;
  workgroupBarrier();
  for (var k = {wg // 2}u; k > 0u; k = k >> 1u) {{
    if (lid < k) {{ sh[lid] = {comb}(sh[lid], sh[lid + k]); }}
    workgroupBarrier();
  }}
  let r = sh[0];
  workgroupBarrier();
  return r;
}}
"""


def _subgroup_comb(st: str, comb: str, wg: int) -> str:
    """WGSL wg_comb: butterfly shuffles within each subgroup, then the subgroups' values (one barrier)."""
    fields = ", ".join(f"subgroupShuffleXor(s.{f}, k)" for f in _FIELDS[st])
    return f"""
var<workgroup> sh: array<{st}, {wg}>;
fn wg_comb(v: {st}, lid: u32, sg_lane: u32, sg_size: u32) -> {st} {{
  var s = v;
  for (var k = sg_size / 2u; k > 0u; k = k >> 1u) {{ s = {comb}(s, {st}({fields})); }}
  if (sg_lane == 0u) {{ sh[lid / sg_size] = s; }}
  workgroupBarrier();
  var t = sh[0];
  for (var j = 1u; j < {wg}u / sg_size; j++) {{ t = {comb}(t, sh[j]); }}
  workgroupBarrier();
  return t;
}}
"""


def _hsum(vec: bool, e: str) -> str:
    return f"dot({e}, vec4<f32>(1.0))" if vec else e


def _hmax(vec: bool, e: str) -> str:
    return f"max_f(max_f({e}.x, {e}.y), max_f({e}.z, {e}.w))" if vec else e


def _source(p: RowProblem, vec: bool, cached: int, wg: int, mode: str, subgroup: bool = False) -> str:
    """mode: "row" (a workgroup per row), "stats" (pass 1: chunk statistics) or "apply" (pass 2);
    `subgroup`: combine with subgroup shuffles (needs the `subgroups` feature)."""
    T = "vec4<f32>" if vec else "f32"
    st = _STATE[p.op]
    decl = "struct Params { w: array<vec4<u32>, 4> }\n@group(0) @binding(0) var<uniform> P: Params;\n"
    decl += _decl(p.dtype, vec, 1, "X")
    b = 2
    if p.backward:
        decl += _decl(p.dtype, vec, 2, "D")
        b = 3
    out16 = p.out_dtype == "f16"
    if mode != "stats":
        decl += (f"@group(0) @binding({b}) var<storage, read_write> O"
                 f"{'V' if vec else ''}: array<{'vec2<u32>' if out16 else T}>;\n")
        b += 1
    if mode != "row":
        acc = "read" if mode == "apply" else "read_write"
        decl += f"@group(0) @binding({b}) var<storage, {acc}> S: array<{st}>;\n"
        b += 1
    if mode != "stats":
        for flag, buf in ((p.weight, "G"), (p.bias, "B")):
            if flag:
                decl += _decl(p.dtype, vec, b, buf)
                b += 1
        if p.stats:
            decl += f"@group(0) @binding({b}) var<storage, read_write> E: array<f32>;\n"
    fns = (_BF16 if p.dtype == "bf16" else "") + _loads(p.dtype, vec, "ldx", "X")
    if p.backward:
        fns += _loads(p.dtype, vec, "ldd", "D")
    if p.weight and mode != "stats":
        fns += _loads(p.dtype, vec, "ldg", "G")
    if p.bias and mode != "stats":
        fns += _loads(p.dtype, vec, "ldb", "B")
    comb = _COMB[st]
    src = (("enable subgroups;\n" if subgroup else "") + decl
           + "fn prm(k: u32) -> u32 { return P.w[k >> 2u][k & 3u]; }\n" + HELPERS + _STATES + fns)
    src += _subgroup_comb(st, comb, wg) if subgroup else _tree_comb(st, comb, wg)
    U = 4 if vec else 1
    sgc = ", sg_lane, sg_size" if subgroup else ""
    # statistics of a unit value `v` (count c valid elements; units are whole)
    if st == "ML":
        unit_stat = "unit_ml(v)"
        src += f"""fn unit_ml(v: {T}) -> ML {{
  let m = {_hmax(vec, 'v')};
  if (m == -inf_f()) {{ return ML(m, 0.0); }}  // a masked unit adds nothing (and no NaN)
  return ML(m, {_hsum(vec, 'exp(v - m)')});
}}
"""
    elif st == "WF":
        src += f"""fn unit_wf(v: {T}) -> WF {{
  let m = {_hsum(vec, 'v')} / {U}.0;
  let d = v - m;
  return WF({U}.0, m, {_hsum(vec, 'd * d')});
}}
"""
        unit_stat = "unit_wf(v)"
    elif p.op == "softmax_backward":
        unit_stat = f"SQ({_hsum(vec, 'gd * v')})"
    elif p.op == "log_softmax_backward":
        unit_stat = f"SQ({_hsum(vec, 'gd')})"
    else:
        unit_stat = f"SQ({_hsum(vec, 'v * v')})"
    init = {"ML": "ML(-inf_f(), 0.0)", "WF": "WF(0.0, 0.0, 0.0)", "SQ": "SQ(0.0)"}[st]
    # the output of one unit from the row's combined statistics r
    w_term = " * ldg(u)" if p.weight else ""
    b_term = " + ldb(u)" if p.bias else ""
    outv = {
        "softmax": "exp(v - r.m) / r.s",
        "log_softmax": "v - (r.m + log(r.s))",
        "layer_norm": f"(v - r.m) * rstd{w_term}{b_term}",
        "rms_norm": f"v * rstd{w_term}",
        "softmax_backward": "v * (gd - r.s)",
        "log_softmax_backward": "gd - exp(v) * r.s",
    }[p.op]
    load = "let v = ldx(xrow + u);" + (" let gd = ldd(drow + u);" if p.backward else "")
    pre = {"layer_norm": "let rstd = inverseSqrt(r.m2 / r.n + eps);",
           "rms_norm": "let rstd = inverseSqrt(r.s / f32(prm(1u)) + eps);"}.get(p.op, "")
    stats_store = ""
    if p.stats and p.op == "layer_norm":
        stats_store = "E[row] = r.m; E[prm(0u) + row] = rstd;"
    elif p.stats and p.op == "rms_norm":
        stats_store = "E[row] = 0.0; E[prm(0u) + row] = rstd;"
    store = f"O{'V' if vec else ''}[orow + u] = {'pk16(' + outv + ')' if out16 else outv};"
    if out16:
        src += ("fn pk16(v: vec4<f32>) -> vec2<u32> "
                "{ return vec2<u32>(pack2x16float(v.xy), pack2x16float(v.zw)); }\n")
    # params: 0 rows, 1 n, 2 x_off (units), 3 row stride (units), 4 eps, 5 chunks, 6 chunk units
    sg_args = (", @builtin(subgroup_invocation_id) sg_lane: u32, @builtin(subgroup_size) sg_size: u32"
               if subgroup else "")
    head = f"""
@compute @workgroup_size({wg})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>{sg_args}) {{
  let lid = lid3.x;
  let g = wid.x + wid.y * nwg.x;
  let nu = prm(1u) / {U}u;
  let eps = bitcast<f32>(prm(4u));
"""
    if mode == "row":
        src += head + f"""  let row = g;
  let live = row < prm(0u);
  let xrow = prm(2u) + row * prm(3u);
  let drow = prm(7u) + row * prm(8u);
  let orow = row * nu;
  var part = {init};
"""
        if cached:
            keep = "c[k] = v;" + (" cg[k] = gd;" if p.backward else "")
            restore = "let v = c[k];" + (" let gd = cg[k];" if p.backward else "")
            grads = f"  var cg: array<{T}, {cached}>;\n" if p.backward else ""
            src += f"""  var c: array<{T}, {cached}>;
{grads}  for (var k = 0u; k < {cached}u; k++) {{
    let u = lid + k * {wg}u;
    if (live && u < nu) {{ {load} {keep} part = {comb}(part, {unit_stat}); }}
  }}
  let r = wg_comb(part, lid{sgc});
  {pre}
  if (live) {{
    for (var k = 0u; k < {cached}u; k++) {{
      let u = lid + k * {wg}u;
      if (u < nu) {{ {restore} {store} }}
    }}
    if (lid == 0u) {{ {stats_store} }}
  }}
}}
"""
        else:
            src += f"""  if (live) {{
    for (var u = lid; u < nu; u += {wg}u) {{ {load} part = {comb}(part, {unit_stat}); }}
  }}
  let r = wg_comb(part, lid{sgc});
  {pre}
  if (live) {{
    for (var u = lid; u < nu; u += {wg}u) {{ {load} {store} }}
    if (lid == 0u) {{ {stats_store} }}
  }}
}}
"""
        return src
    src += head + """  let C = prm(5u);
  let row = g / C; let c = g % C;
  let live = row < prm(0u);
  let xrow = prm(2u) + row * prm(3u);
  let drow = prm(7u) + row * prm(8u);
  let orow = row * nu;
  let start = c * prm(6u);
  let end = min(start + prm(6u), nu);
"""
    if mode == "stats":
        src += f"""  var part = {init};
  if (live) {{
    for (var u = start + lid; u < end; u += {wg}u) {{
      {load} part = {comb}(part, {unit_stat});
    }}
  }}
  let r = wg_comb(part, lid{sgc});
  if (live && lid == 0u) {{ S[g] = r; }}
}}
"""
        return src
    src += f"""  var part = {init};
  if (live) {{ for (var k = lid; k < C; k += {wg}u) {{ part = {comb}(part, S[row * C + k]); }} }}
  let r = wg_comb(part, lid{sgc});
  {pre}
  if (live) {{
    for (var u = start + lid; u < end; u += {wg}u) {{ {load} {store} }}
    if (lid == 0u && c == 0u) {{ {stats_store} }}
  }}
}}
"""
    return src


def _read_only(roles, partials_read: bool = False) -> frozenset[int]:
    read = {"x", "grad", "weight", "bias"} | ({"partials"} if partials_read else set())
    return frozenset(i for i, r in enumerate(roles) if r in read)


def plan_rows(p: RowProblem, caps: DeviceCaps, variant: str | None = None) -> RowPlan:
    """The dispatches of `p` on `caps` (memoised). Roles: "x", "out" ([rows, n] of `out_dtype`), "weight",
    "bias", "stats" (f32 [2, rows]: mean, then rstd) and scratch "partials"."""
    return cached_plan(_plan_rows, p, caps, variant)


def _plan_rows(p: RowProblem, caps: DeviceCaps, variant: str | None = None) -> RowPlan:
    """The uncached planner of `plan_rows`."""
    names = variants(p, caps)
    variant = variant or names[0]
    if variant not in names:
        raise ValueError(f"rows variant {variant!r} is not one of {names}")
    if p.rows == 0 or p.n == 0:
        return RowPlan((), {})
    U = _unit(p)   # elements per load unit (offsets and strides are passed in units)
    vec = U == 4
    nu = p.n // U
    wg, subgroup = 256, False
    if variant != "workgroup":
        threads, how = variant.split(".")
        wg, subgroup = int(threads[2:]), how == "sg"
    max_groups = caps.limit("max-compute-workgroups-per-dimension", 65535)
    scalar_eps = f32_word(p.eps)
    st = _STATE[p.op]
    roles_out = ["out"]
    roles_tail = [r for r, on in (("weight", p.weight), ("bias", p.bias), ("stats", p.stats)) if on]
    base_params = [p.rows, p.n, p.offset // U, p.stride // U, scalar_eps]
    grad_words = [p.grad_offset // U, p.grad_stride // U]
    head = [PARAMS, "x"] + (["grad"] if p.backward else [])
    if _multipass(p):
        chunk_units = CHUNK // U
        chunks = ceil_div(nu, chunk_units)
        params = tuple(base_params + [chunks, chunk_units] + grad_words + [0] * 7)
        groups = grid_within(p.rows * chunks, max_groups)
        roles1 = head + ["partials"]
        s1 = KernelLaunch(name=f"rows.{p.op}.{p.dtype}.stats", wgsl=_source(p, vec, 0, 256, "stats"),
                          grid=(*groups, 1), workgroup_size=(256, 1, 1), bindings=tuple(roles1),
                          params=params, read_only=_read_only(roles1))
        roles2 = head + roles_out + ["partials"] + roles_tail
        s2 = KernelLaunch(name=f"rows.{p.op}.{p.dtype}.apply", wgsl=_source(p, vec, 0, 256, "apply"),
                          grid=(*groups, 1), workgroup_size=(256, 1, 1), bindings=tuple(roles2),
                          params=params, read_only=_read_only(roles2, True))
        return RowPlan((s1, s2), {"partials": p.rows * chunks * _WORDS[st] * 4})
    cached = ceil_div(nu, wg)
    cached = cached if cached <= CACHE_UNITS else 0
    params = tuple(base_params + [1, nu] + grad_words + [0] * 7)
    launch = KernelLaunch(name=f"rows.{p.op}.{p.dtype}.{'vec4' if vec else 'scalar'}.{variant}"
                               f"{'.cached' if cached else '.stream'}",
                          wgsl=_source(p, vec, cached, wg, "row", subgroup),
                          grid=(*grid_within(p.rows, max_groups), 1),
                          workgroup_size=(wg, 1, 1), bindings=tuple(head + roles_out + roles_tail),
                          params=params, read_only=_read_only(head + roles_out + roles_tail))
    return RowPlan((launch,), {})


def record_rows(plan: RowPlan, operands: dict, rt=None) -> None:
    """Record the plan's dispatches with `operands[role]` = buffer id (or BufferSlice)."""
    for launch in plan.steps:
        record(launch, operands, rt)


# ---- the strided variant: a row op along any dim of strided tensors ----------------------------------

MAX_ROW_DIMS = 8   # dims besides the row's (they index the rows)
STRIDED = "strided"
STRIDED_OPS = ("softmax", "log_softmax", "softmax_backward", "log_softmax_backward", "layer_norm")
_WG = 64
_B = 4 + MAX_ROW_DIMS  # first buffer block of the params
_BLK = 2 + MAX_ROW_DIMS


@dataclass(frozen=True)
class View:
    """Where a strided operand's elements are: element offset and one stride per dim."""

    offset: int
    strides: tuple[int, ...]


@dataclass(frozen=True)
class StridedRowProblem:
    """Row op `op` along `dim` of x (storage `dtype`, `sizes`), writing f32 `out` of the same sizes;
    backwards read "grad" (storage `grad_dtype`) too; layer_norm writes [mean, rstd] per row to "stats"
    with `stats`."""

    op: str
    dtype: str
    sizes: tuple[int, ...]
    dim: int
    x: View
    out: View
    grad: View | None = None
    grad_dtype: str | None = None
    eps: float = 0.0
    stats: bool = False

    @property
    def rows(self) -> int:
        """Rows: the product of every other dim's size."""
        rows = 1
        for d, size in enumerate(self.sizes):
            if d != self.dim:
                rows *= size
        return rows

    @property
    def n(self) -> int:
        """Elements per row."""
        return self.sizes[self.dim] if self.sizes else 1

    def shape_class(self) -> str:
        """A coarse autotuning key (the family's `problem_key`): the op, power-of-two buckets of rows and
        n, and the storage dtype."""
        def bucket(x: int) -> int:
            return 1 << max(0, (x - 1).bit_length())
        return f"{self.op}.r{bucket(self.rows)}n{bucket(self.n)}.{self.dtype}"

    def check(self) -> None:
        """NotImplementedError/ValueError naming what the strided kernel cannot run."""
        if self.op not in STRIDED_OPS:
            raise ValueError(f"strided rows: unknown op {self.op!r} (one of {STRIDED_OPS})")
        if len(self.sizes) - 1 > MAX_ROW_DIMS:
            raise NotImplementedError(f"webgpu: '{self.op}' supports at most {MAX_ROW_DIMS + 1} dims")


# bodies of the strided kernel, written against xl(r), gl(r), st(r, v), wsum(v, lid), wmax(v, lid)
BODIES = {
    "softmax": """
  var m = -inf_();
  for (var r = lid; r < n; r += 64u) { m = max_(m, xl(r)); }
  m = wmax(m, lid);
  var s = 0.0;
  for (var r = lid; r < n; r += 64u) { s += exp(xl(r) - m); }
  s = wsum(s, lid);
  for (var r = lid; r < n; r += 64u) { st(r, exp(xl(r) - m) / s); }
""",
    "log_softmax": """
  var m = -inf_();
  for (var r = lid; r < n; r += 64u) { m = max_(m, xl(r)); }
  m = wmax(m, lid);
  var s = 0.0;
  for (var r = lid; r < n; r += 64u) { s += exp(xl(r) - m); }
  s = wsum(s, lid);
  let lse = m + log(s);
  for (var r = lid; r < n; r += 64u) { st(r, xl(r) - lse); }
""",
    "softmax_backward": """
  var s = 0.0;
  for (var r = lid; r < n; r += 64u) { s += gl(r) * xl(r); }
  s = wsum(s, lid);
  for (var r = lid; r < n; r += 64u) { st(r, xl(r) * (gl(r) - s)); }
""",
    "log_softmax_backward": """
  var s = 0.0;
  for (var r = lid; r < n; r += 64u) { s += gl(r); }
  s = wsum(s, lid);
  for (var r = lid; r < n; r += 64u) { st(r, gl(r) - exp(xl(r)) * s); }
""",
    # X = input, G = weight (or unused), O = normalised output; E receives [mean, rstd] per row
    "layer_norm": """
  var s = 0.0;
  for (var r = lid; r < n; r += 64u) { s += xl(r); }
  let mean = wsum(s, lid) / f32(n);
  var v = 0.0;
  for (var r = lid; r < n; r += 64u) { let d = xl(r) - mean; v += d * d; }
  let rstd = inverseSqrt(wsum(v, lid) / f32(n) + eps);
  for (var r = lid; r < n; r += 64u) { st(r, (xl(r) - mean) * rstd); }
  if (lid == 0u && live) { E[2u * row] = mean; E[2u * row + 1u] = rstd; }
""",
}


def _strided_source(body: str, x_dtype: str, g_dtype: str | None, extra: bool) -> str:
    """WGSL of the strided row kernel: `body` written against xl(r), gl(r), st(r, v), wsum(v), wmax(v);
    P = [rows, n, n_row_dims, eps, row_sizes[8], then per buffer (offset, dim stride, row strides[8])]."""
    decl = ["@group(0) @binding(0) var<storage, read> P: array<u32>;",
            "@group(0) @binding(1) var<storage, read> X: array<u32>;",
            "@group(0) @binding(2) var<storage, read_write> O: array<f32>;"]
    fns = load_fn("xload", "X", x_dtype, "f32")
    if g_dtype is not None:
        decl.append("@group(0) @binding(3) var<storage, read> G: array<u32>;")
        fns += load_fn("gload", "G", g_dtype, "f32")
    if extra:
        decl.append(f"@group(0) @binding({4 if g_dtype is not None else 3}) var<storage, read_write> E: "
                    f"array<f32>;")
    xb, gb, ob = _B, _B + _BLK, _B + 2 * _BLK
    src = "\n".join(decl) + PRELUDE + fns + f"""
var<workgroup> red: array<f32, {_WG}>;
var<private> xbase: u32;
var<private> gbase: u32;
var<private> obase: u32;
var<private> live: bool;
fn wsum(v: f32, lid: u32) -> f32 {{
  red[lid] = v;
  workgroupBarrier();
  for (var k = {_WG // 2}u; k > 0u; k = k >> 1u) {{
    if (lid < k) {{ red[lid] = red[lid] + red[lid + k]; }}
    workgroupBarrier();
  }}
  let r = red[0];
  workgroupBarrier();
  return r;
}}
fn wmax(v: f32, lid: u32) -> f32 {{
  red[lid] = v;
  workgroupBarrier();
  for (var k = {_WG // 2}u; k > 0u; k = k >> 1u) {{
    if (lid < k) {{ red[lid] = max_(red[lid], red[lid + k]); }}
    workgroupBarrier();
  }}
  let r = red[0];
  workgroupBarrier();
  return r;
}}
fn row_base(row: u32, b: u32) -> u32 {{
  var r = P[b]; var rem = row;
  for (var d = i32(P[2]) - 1; d >= 0; d--) {{
    let n = P[4u + u32(d)]; r += (rem % n) * P[b + 2u + u32(d)]; rem = rem / n;
  }}
  return r;
}}
fn xl(r: u32) -> f32 {{ return xload(xbase + r * P[{xb + 1}u]); }}
{"fn gl(r: u32) -> f32 { return gload(gbase + r * P[" + str(gb + 1) + "u]); }" if g_dtype else ""}
fn st(r: u32, v: f32) {{ if (live) {{ O[obase + r * P[{ob + 1}u]] = v; }} }}
@compute @workgroup_size({_WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {{
  let lid = lid3.x;
  let row = wid.x + wid.y * nwg.x;
  live = row < P[0];
  let n = select(0u, P[1], live);
  let eps = bitcast<f32>(P[3]);
  if (live) {{
    xbase = row_base(row, {xb}u);
    gbase = row_base(row, {gb}u);
    obase = row_base(row, {ob}u);
  }}
{body}}}
"""
    return src



def _block(view: View | None, dim: int, kept: list[int]) -> list[int]:
    if view is None:
        return [0] * _BLK
    pad = [0] * (MAX_ROW_DIMS - len(kept))
    return [view.offset, view.strides[dim], *[view.strides[d] for d in kept], *pad]


def strided_variants(p: StridedRowProblem, caps: DeviceCaps) -> list[str]:
    """The strided row kernel's one variant."""
    p.check()
    return [STRIDED]


def plan_strided_rows(p: StridedRowProblem, caps: DeviceCaps, variant: str | None = None) -> RowPlan:
    """The launch of `p` (none for an empty tensor): bindings params, "x", "out", then "grad" and "stats"
    where the problem has them."""
    p.check()
    if variant not in (None, STRIDED):
        raise ValueError(f"strided rows variant {variant!r} is not one of {[STRIDED]}")
    kept = [d for d in range(len(p.sizes)) if d != p.dim]
    if p.rows == 0 or p.n == 0:
        return RowPlan(())
    sizes = [p.sizes[d] for d in kept] + [0] * (MAX_ROW_DIMS - len(kept))
    params = (p.rows, p.n, len(kept), f32_word(p.eps), *sizes, *_block(p.x, p.dim, kept),
              *_block(p.grad, p.dim, kept), *_block(p.out, p.dim, kept))
    roles = [PARAMS, "x", "out"] + (["grad"] if p.grad is not None else []) + (["stats"] if p.stats else [])
    groups = (p.rows, 1, 1) if p.rows <= 65535 else (65535, ceil_div(p.rows, 65535), 1)
    launch = KernelLaunch(name=f"rows.{p.op}.{p.dtype}.{STRIDED}",
                          wgsl=_strided_source(BODIES[p.op], p.dtype, p.grad_dtype, p.stats), grid=groups,
                          workgroup_size=(_WG, 1, 1), bindings=tuple(roles), params=params,
                          read_only=frozenset(i for i, r in enumerate(roles) if r in ("x", "grad")))
    return RowPlan((launch,))


FAMILY = Family("rows", variants, plan_rows)
STRIDED_FAMILY = Family("rows_strided", strided_variants, plan_strided_rows)
