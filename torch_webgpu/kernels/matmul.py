"""Matmul family: out[b] = epilogue(alpha * A[b] @ B[b]) for batched, strided (transposed) operands.

The problem is declarative (`MatmulProblem`); `plan_matmul` picks a variant for a device and returns a
`KernelLaunch`. Epilogue, in order: `alpha * acc`, `+ beta * bias` (broadcast by strides), activation,
`+ residual`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .launch import PARAMS, DeviceCaps, KernelLaunch, ceil_div, f32_word

ACTIVATIONS = {
    None: "v",
    "relu": "max(v, 0.0)",
    "gelu": "0.5 * v * (1.0 + erf_approx(v * 0.70710678118654752))",
    "gelu_tanh": ("0.5 * v * (1.0 + tanh(clamp(0.7978845608028654 * (v + 0.044715 * v * v * v), "
                  "-15.0, 15.0)))"),
    "silu": "v / (1.0 + exp(-v))",
    "sigmoid": "1.0 / (1.0 + exp(-v))",
    "tanh": "tanh(clamp(v, -15.0, 15.0))",
}

# Abramowitz–Stegun 7.1.26 is too coarse for torch's tolerances; this erf keeps |err| < 1.2e-7.
ERF_WGSL = """
fn erf_approx(x: f32) -> f32 {
  let z = abs(x);
  let t = 1.0 / (1.0 + 0.5 * z);
  let r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
          t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
          t * (-0.82215223 + t * 0.17087277)))))))));
  return select(r - 1.0, 1.0 - r, x >= 0.0);
}
"""


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


TILE = 16


def _simt_source(p: MatmulProblem) -> str:
    t = p.dtype
    enable = "enable f16;\n" if t == "f16" else ""
    bias_decl = f"@group(0) @binding(4) var<storage, read> C: array<{t}>;\n" if p.bias else ""
    res_binding = 5 if p.bias else 4
    res_decl = (f"@group(0) @binding({res_binding}) var<storage, read> R: array<{t}>;\n"
                if p.residual else "")
    bias_term = ("  v = v + beta * f32(C[P.c.x + batch * P.c.y + row * P.c.z + col * P.c.w]);\n"
                 if p.bias else "")
    res_term = ("  v = v + f32(R[P.r.x + batch * P.r.y + row * P.r.z + col * P.r.w]);\n"
                if p.residual else "")
    act = ACTIVATIONS[p.activation]
    erf = ERF_WGSL if p.activation == "gelu" else ""
    return f"""{enable}
struct Params {{ mnkb: vec4<u32>, a: vec4<u32>, b: vec4<u32>, o: vec4<u32>, c: vec4<u32>, r: vec4<u32>,
                ab: vec4<f32> }}
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> A: array<{t}>;
@group(0) @binding(2) var<storage, read> B: array<{t}>;
@group(0) @binding(3) var<storage, read_write> O: array<{t}>;
{bias_decl}{res_decl}{erf}
var<workgroup> As: array<array<f32, {TILE}>, {TILE}>;
var<workgroup> Bs: array<array<f32, {TILE}>, {TILE}>;
@compute @workgroup_size({TILE}, {TILE})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {{
  let M = P.mnkb.x; let N = P.mnkb.y; let K = P.mnkb.z;
  let batch = wid.z;
  let row = wid.y * {TILE}u + lid.y;
  let col = wid.x * {TILE}u + lid.x;
  let abase = P.a.x + batch * P.a.y;
  let bbase = P.b.x + batch * P.b.y;
  var acc = 0.0;
  for (var t = 0u; t < K; t += {TILE}u) {{
    let ka = t + lid.x;
    var av = 0.0;
    if (row < M && ka < K) {{ av = f32(A[abase + row * P.a.z + ka * P.a.w]); }}
    As[lid.y][lid.x] = av;
    let kb = t + lid.y;
    var bv = 0.0;
    if (kb < K && col < N) {{ bv = f32(B[bbase + kb * P.b.z + col * P.b.w]); }}
    Bs[lid.y][lid.x] = bv;
    workgroupBarrier();
    for (var k = 0u; k < {TILE}u; k++) {{ acc = fma(As[lid.y][k], Bs[k][lid.x], acc); }}
    workgroupBarrier();
  }}
  if (row >= M || col >= N) {{ return; }}
  let alpha = P.ab.x; let beta = P.ab.y;
  var v = alpha * acc;
{bias_term}  v = {act};
{res_term}  O[P.o.x + batch * P.o.y + row * P.o.z + col * P.o.w] = {t}(v);
}}
"""


def _params(p: MatmulProblem) -> tuple[int, ...]:
    zero = [0, 0, 0, 0]
    return tuple([p.m, p.n, p.k, p.batch] + p.a.words() + p.b.words() + p.out.words()
                 + (p.bias.words() if p.bias else zero) + (p.residual.words() if p.residual else zero)
                 + [f32_word(p.alpha), f32_word(p.beta), 0, 0])


def variants(p: MatmulProblem, caps: DeviceCaps) -> list[str]:
    """Variant names that can run `p` on `caps`, best default first."""
    if p.dtype == "f16" and not caps.shader_f16:
        return []
    return ["simt16"]


def plan_matmul(p: MatmulProblem, caps: DeviceCaps, variant: str | None = None) -> KernelLaunch:
    """The launch of `p` on `caps` (`variant`: one of `variants(p, caps)`, default the first)."""
    names = variants(p, caps)
    if not names:
        raise TypeError(f"matmul: dtype {p.dtype} needs the adapter feature 'shader-f16'")
    variant = variant or names[0]
    if variant not in names:
        raise ValueError(f"matmul variant {variant!r} is not one of {names}")
    if p.activation not in ACTIVATIONS:
        raise ValueError(f"matmul epilogue: unknown activation {p.activation!r} "
                         f"({sorted(map(str, ACTIVATIONS))})")
    if p.batch > caps.limit("max-compute-workgroups-per-dimension", 65535):
        raise ValueError(f"matmul batch {p.batch} exceeds the device's workgroup grid")
    bindings = [PARAMS, "a", "b", "out"] + (["bias"] if p.bias else []) + (["residual"] if p.residual else [])
    read_only = frozenset(i for i, r in enumerate(bindings) if r not in ("out", PARAMS))
    return KernelLaunch(name=f"matmul.{p.dtype}.{variant}", wgsl=_simt_source(p),
                        grid=(ceil_div(p.n, TILE), ceil_div(p.m, TILE), p.batch),
                        workgroup_size=(TILE, TILE, 1), bindings=tuple(bindings), params=_params(p),
                        read_only=read_only)
