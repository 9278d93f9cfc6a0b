"""Reductions over any set of dims, generated from a small spec (state type, init, accumulate, combine,
finish), reading a strided input directly.

The input is seen as kept dims (one output each, row-major) x reduced dims (R elements per output).
Large R: one 64-wide workgroup per output with a shared-memory tree; small R: one invocation per output.
Values are written as f32 (callers cast), optional indices as int64 (low word + zero high word).
Params: P = [n_out, R, n_kept, n_red, in_offset, kept_sizes[8], kept_strides[8], red_sizes[8],
red_strides[8], scalars...].
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...runtime import get_runtime
from .dtypes import convert, dtype_info
from .operand import MAX_DIMS, Operand, pack_u32
from .recording import dispatch
from .wgsl_math import PRELUDE

WG = 64
SERIAL_MAX = 16  # reduce serially per invocation up to this many elements per output


@dataclass(frozen=True)
class ReduceSpec:
    """WGSL snippets of one reduction: state type S, init, acc(s, x, i), comb(s, t), fin(s, n) -> f32."""

    state: str
    init: str
    acc: str
    comb: str
    fin: str
    index: str | None = None  # expression of the winning index from state `s` (max/min with indices)
    struct: str = ""
    kind: str = "f32"  # "i64": elements load as exact u32-pair int64 and the value output is int64


_VI = "struct VI { v: f32, i: u32 }"


def _arg(cmp: str) -> ReduceSpec:
    # NaN wins (as in torch); ties keep the lowest index
    fns = f"""
fn vi_better(x: f32, xi: u32, s: VI) -> bool {{
  if (s.i == 0xffffffffu) {{ return xi != 0xffffffffu; }}
  if (xi == 0xffffffffu) {{ return false; }}
  if (isnan_(s.v)) {{ return isnan_(x) && xi < s.i; }}
  if (isnan_(x)) {{ return true; }}
  return x {cmp} s.v || (x == s.v && xi < s.i);
}}
fn vi_acc(s: VI, x: f32, i: u32) -> VI {{ if (vi_better(x, i, s)) {{ return VI(x, i); }} return s; }}
fn vi_comb(s: VI, t: VI) -> VI {{ if (vi_better(t.v, t.i, s)) {{ return t; }} return s; }}
"""
    return ReduceSpec("VI", "VI(0.0, 0xffffffffu)", "vi_acc(s, x, i)", "vi_comb(s, t)", "s.v", index="s.i",
                      struct=_VI + fns)


_WELFORD = "struct W { n: f32, m: f32, m2: f32 }"
_WELFORD_ACC = "welford_acc(s, x)"
_WELFORD_COMB = "welford_comb(s, t)"
_WELFORD_FNS = """
fn welford_acc(s: W, x: f32) -> W {
  let n = s.n + 1.0; let d = x - s.m; let m = s.m + d / n;
  return W(n, m, s.m2 + d * (x - m));
}
fn welford_comb(s: W, t: W) -> W {
  if (s.n == 0.0) { return t; } if (t.n == 0.0) { return s; }
  let n = s.n + t.n; let d = t.m - s.m;
  return W(n, s.m + d * t.n / n, s.m2 + t.m2 + d * d * s.n * t.n / n);
}
"""
_LSE = "struct L { m: f32, s: f32 }"
_LSE_FNS = """
fn lse_acc(s: L, x: f32) -> L {
  if (x == -inf_() ) { return s; }
  if (isnan_(x)) { return L(x, 1.0); }
  if (x > s.m) { return L(x, s.s * exp(s.m - x) + 1.0); }
  return L(s.m, s.s + exp(x - s.m));
}
fn lse_comb(a: L, b: L) -> L {
  if (b.s == 0.0) { return a; } if (a.s == 0.0) { return b; }
  if (isnan_(a.m) || isnan_(b.m)) { return L(nan_(), 1.0); }
  if (a.m >= b.m) { return L(a.m, a.s + b.s * exp(b.m - a.m)); }
  return L(b.m, b.s + a.s * exp(a.m - b.m));
}
fn lse_fin(s: L) -> f32 {
  if (s.s == 0.0) { return -inf_(); }
  if (isinf_(s.m)) { return s.m; }
  return s.m + log(s.s);
}
"""

SPECS: dict[str, ReduceSpec] = {
    "sum": ReduceSpec("f32", "0.0", "s + x", "s + t", "s"),
    "mean": ReduceSpec("f32", "0.0", "s + x", "s + t", "s / f32(n)"),
    "prod": ReduceSpec("f32", "1.0", "s * x", "s * t", "s"),
    "amax": ReduceSpec("f32", "-inf_()", "max_(s, x)", "max_(s, t)", "s"),
    "amin": ReduceSpec("f32", "inf_()", "min_(s, x)", "min_(s, t)", "s"),
    "nansum": ReduceSpec("f32", "0.0", "select(s + x, s, isnan_(x))", "s + t", "s"),
    "max": _arg(">"),
    "min": _arg("<"),
    "all": ReduceSpec("f32", "1.0", "select(s, 0.0, x == 0.0)", "min(s, t)", "s"),
    "any": ReduceSpec("f32", "0.0", "select(s, 1.0, x != 0.0)", "max(s, t)", "s"),
    "count_nonzero": ReduceSpec("f32", "0.0", "select(s, s + 1.0, x != 0.0)", "s + t", "s"),
    "norm2": ReduceSpec("f32", "0.0", "s + x * x", "s + t", "sqrt(s)"),
    "norm1": ReduceSpec("f32", "0.0", "s + abs(x)", "s + t", "s"),
    "norm_inf": ReduceSpec("f32", "0.0", "max_(s, abs(x))", "max_(s, t)", "s"),
    "norm_ninf": ReduceSpec("f32", "inf_()", "min_(s, abs(x))", "min_(s, t)", "s"),
    "norm0": ReduceSpec("f32", "0.0", "select(s, s + 1.0, x != 0.0)", "s + t", "s"),
    "normp": ReduceSpec("f32", "0.0", "s + pow_(abs(x), p)", "s + t", "pow_(s, 1.0 / p)"),
    "var": ReduceSpec("W", "W(0.0, 0.0, 0.0)", _WELFORD_ACC, _WELFORD_COMB,
                      "s.m2 / max(s.n - correction, 0.0)", struct=_WELFORD + _WELFORD_FNS),
    "std": ReduceSpec("W", "W(0.0, 0.0, 0.0)", _WELFORD_ACC, _WELFORD_COMB,
                      "sqrt(s.m2 / max(s.n - correction, 0.0))", struct=_WELFORD + _WELFORD_FNS),
    "var_mean": ReduceSpec("W", "W(0.0, 0.0, 0.0)", _WELFORD_ACC, _WELFORD_COMB,
                           "s.m2 / max(s.n - correction, 0.0)", struct=_WELFORD + _WELFORD_FNS),
    "logsumexp": ReduceSpec("L", "L(-inf_(), 0.0)", "lse_acc(s, x)", "lse_comb(s, t)", "lse_fin(s)",
                            struct=_LSE + _LSE_FNS),
}
_V2 = "vec2<u32>"
SPECS["sum_i64"] = ReduceSpec(_V2, "vec2<u32>(0u, 0u)", "add64(s, x)", "add64(s, t)", "s", kind="i64")
SPECS["prod_i64"] = ReduceSpec(_V2, "vec2<u32>(1u, 0u)", "mul64(s, x)", "mul64(s, t)", "s", kind="i64")
SPECS["argmax"] = SPECS["max"]
SPECS["argmin"] = SPECS["min"]

_HEAD = 5 + 4 * MAX_DIMS


def _source(name: str, in_dtype: torch.dtype, serial: bool, scalars: tuple[str, ...], with_values: bool,
            with_index: bool, extra_out: str | None) -> str:
    spec = SPECS[name]
    info = dtype_info(in_dtype, name)
    vk = spec.kind
    vt = "vec2<u32>" if vk == "i64" else "f32"
    load = convert(info.load.replace("B[", "X["), info.kind, vk)
    decl = ["@group(0) @binding(0) var<storage, read> P: array<u32>;",
            "@group(0) @binding(1) var<storage, read> X: array<u32>;"]
    b = 2
    if with_values:
        velem = "u32" if vk == "i64" else "f32"
        decl.append(f"@group(0) @binding({b}) var<storage, read_write> V: array<{velem}>;")
        b += 1
    if with_index:
        decl.append(f"@group(0) @binding({b}) var<storage, read_write> I: array<u32>;")
        b += 1
    if extra_out:
        decl.append(f"@group(0) @binding({b}) var<storage, read_write> E: array<f32>;")
    sdecl = "".join(f"  let {s} = bitcast<f32>(P[{_HEAD + k}u]);\n" for k, s in enumerate(scalars))
    st = spec.state
    store = ""
    if with_values:
        if vk == "i64":
            store += "    let r = fin(s, P[1]); V[2u * o] = r.x; V[2u * o + 1u] = r.y;\n"
        else:
            store += "    V[o] = fin(s, P[1]);\n"
    if with_index:
        store += f"    I[2u * o] = {spec.index}; I[2u * o + 1u] = 0u;\n"
    if extra_out:
        store += f"    E[o] = {extra_out};\n"
    src = "\n".join(decl) + PRELUDE + spec.struct + f"""
fn load_x(i: u32) -> {vt} {{ return {load}; }}
fn init() -> {st} {{ return {spec.init}; }}
fn acc(s: {st}, x: {vt}, i: u32) -> {st} {{
{sdecl}  return {spec.acc};
}}
fn comb(s: {st}, t: {st}) -> {st} {{ return {spec.comb}; }}
fn fin(s: {st}, n: u32) -> {vt} {{
{sdecl}  return {spec.fin};
}}
fn base_of(o: u32) -> u32 {{
  var r = P[4]; var rem = o;
  for (var d = i32(P[2]) - 1; d >= 0; d--) {{
    let n = P[5u + u32(d)]; r += (rem % n) * P[{5 + MAX_DIMS}u + u32(d)]; rem = rem / n;
  }}
  return r;
}}
fn red_off(i: u32) -> u32 {{
  var r = 0u; var rem = i;
  for (var d = i32(P[3]) - 1; d >= 0; d--) {{
    let n = P[{5 + 2 * MAX_DIMS}u + u32(d)]; r += (rem % n) * P[{5 + 3 * MAX_DIMS}u + u32(d)]; rem = rem / n;
  }}
  return r;
}}
"""
    if serial:
        src += f"""
@compute @workgroup_size({WG})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  let o = gid.x + gid.y * nwg.x * {WG}u;
  if (o >= P[0]) {{ return; }}
  let base = base_of(o);
  var s = init();
  for (var r = 0u; r < P[1]; r++) {{ s = acc(s, load_x(base + red_off(r)), r); }}
{store}}}
"""
    else:
        src += f"""
var<workgroup> sh: array<{st}, {WG}>;
@compute @workgroup_size({WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {{
  let o = wid.x + wid.y * nwg.x;
  let live = o < P[0];
  var s = init();
  if (live) {{
    let base = base_of(o);
    for (var r = lid.x; r < P[1]; r += {WG}u) {{ s = acc(s, load_x(base + red_off(r)), r); }}
  }}
  sh[lid.x] = s;
  workgroupBarrier();
  for (var k = {WG // 2}u; k > 0u; k = k >> 1u) {{
    if (lid.x < k) {{ sh[lid.x] = comb(sh[lid.x], sh[lid.x + k]); }}
    workgroupBarrier();
  }}
  if (lid.x == 0u && live) {{
    let s = sh[0];
{store}  }}
}}
"""
    return src


def _split_grid(n: int) -> tuple[int, int, int]:
    limit = 65535
    if n <= limit:
        return (n, 1, 1)
    return (limit, -(-n // limit), 1)


def launch_reduce(name: str, x: Operand, dims: tuple[int, ...], values: int | None,
                  indices: int | None = None, scalars: dict[str, float] | None = None,
                  extra: tuple[str, int] | None = None) -> None:
    """Reduce `x` over `dims` into f32 buffer `values` (and int64 buffer `indices`), outputs row-major."""
    scalars = scalars or {}
    nd = len(x.sizes)
    dims = tuple(sorted(set(d % nd for d in dims))) if nd else ()
    kept = [d for d in range(nd) if d not in dims]
    ksizes = [x.sizes[d] for d in kept]
    n_out = 1
    for s in ksizes:
        n_out *= s
    r = 1
    for d in dims:
        r *= x.sizes[d]
    if n_out == 0:
        return
    rsizes = [x.sizes[d] for d in dims]
    if len(kept) > MAX_DIMS or len(dims) > MAX_DIMS:
        raise NotImplementedError(f"webgpu: '{name}' supports at most {MAX_DIMS} dims")
    pad = lambda v: list(v) + [0] * (MAX_DIMS - len(v))  # noqa: E731
    params = [n_out, r, len(kept), len(dims), x.offset, *pad(ksizes), *pad([x.strides[d] for d in kept]),
              *pad(rsizes), *pad([x.strides[d] for d in dims])]
    params += [float(scalars[k]) for k in sorted(scalars)]
    serial = r <= SERIAL_MAX
    src = _source(name, x.dtype, serial, tuple(sorted(scalars)), values is not None, indices is not None,
                  extra[0] if extra else None)
    rt = get_runtime()
    kernel = rt.kernel(src, label=f"reduce_{name}")
    binds = [rt.constant(pack_u32(params)), x.buffer_id]
    binds += [b for b in (values, indices) if b is not None]
    if extra:
        binds.append(extra[1])
    groups = -(-n_out // WG) if serial else n_out
    dispatch(kernel, binds, _split_grid(groups), label=f"reduce_{name}")
