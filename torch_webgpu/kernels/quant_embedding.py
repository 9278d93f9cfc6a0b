"""Quantized-table embedding: out[i, :] = dequant(W)[ids[i], :], W a [rows, dim] table stored as
quant_matmul stores a linear weight (`QuantWeight`: "i8" bytes or "i4" nibbles in u32 words, scales
[rows, groups] in f32 or f16, optional int8 zero points [rows, groups] 4 per word).

torchao's weight-only configs quantize `nn.Embedding` too (ExecuTorch's Llama recipes quantize the token
table); dequantizing the whole table to gather a few rows would materialise the float table (525 MB in
f16 for a 128256 × 2048 vocabulary) on every call. Here each invocation dequantizes 8 consecutive
weights (one u32 word of i4, two of i8; never across a scale group) of one gathered row in registers and
writes them as f32 or packed f16 (`pack2x16float`, so no two invocations share an output word).
Ids are i32 (compiled plans demote int64) or i64 (`ids_words` 2: the low word is read); out-of-range
ids are clamped to the table (never an out-of-bounds read). torch-free: numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass

from .launch import PARAMS, DeviceCaps, KernelLaunch, ceil_div, grid_within
from .quant_matmul import CHUNK, WEIGHT_FORMATS, QuantWeight

__all__ = ["QuantEmbeddingProblem", "plan_quant_embedding"]

WG = 64


@dataclass(frozen=True)
class QuantEmbeddingProblem:
    """`count` rows of the [rows, dim] table `weight` gathered by ids; `dtype`: the output's storage."""

    rows: int
    dim: int
    count: int
    weight: QuantWeight
    dtype: str = "f32"
    ids_offset: int = 0     # first id, in elements of the ids tensor
    ids_words: int = 1      # u32 words per id: 1 (int32) or 2 (int64)

    def check(self) -> None:
        """ValueError/TypeError naming what the kernel cannot run."""
        w = self.weight
        if w.fmt not in WEIGHT_FORMATS:
            raise ValueError(f"quant embedding: weight format {w.fmt!r} is not one of "
                             f"{sorted(WEIGHT_FORMATS)}")
        if {self.dtype, w.scale_dtype} - {"f32", "f16"}:
            raise TypeError(f"quant embedding: output {self.dtype} / scales {w.scale_dtype} "
                            "(f32 or f16 only)")
        if self.dim % CHUNK or w.group % CHUNK or self.dim % w.group:
            raise ValueError(f"quant embedding: dim={self.dim} and group={w.group} must be multiples of "
                             f"{CHUNK} with dim a multiple of the group")
        if self.ids_words not in (1, 2):
            raise ValueError("quant embedding: ids must be int32 (1 word) or int64 (2 words)")
        if self.rows <= 0 or self.count <= 0:
            raise ValueError(f"quant embedding: needs rows and ids, got rows={self.rows} count={self.count}")


def _source(p: QuantEmbeddingProblem) -> tuple[str, list[str]]:
    w = p.weight
    f16 = "f16" in (p.dtype, w.scale_dtype)
    roles = [PARAMS, "ids", "q", "scale", "out"] + (["zero"] if w.zero else [])
    out_elem = "u32" if p.dtype == "f16" else "f32"
    lines = ["enable f16;" if f16 else "",
             "struct Params { shape: vec4<u32>, q: vec4<u32> }",
             "@group(0) @binding(0) var<uniform> P: Params;",
             "@group(0) @binding(1) var<storage, read> I: array<u32>;",
             "@group(0) @binding(2) var<storage, read> Q: array<u32>;",
             f"@group(0) @binding(3) var<storage, read> S: array<{w.scale_dtype}>;",
             f"@group(0) @binding(4) var<storage, read_write> O: array<{out_elem}>;"]
    if w.zero:
        lines.append("@group(0) @binding(5) var<storage, read> Z: array<u32>;")
        zero = "let e = row * P.q.y + g; let z = f32(i32(Z[e / 4u] << (24u - 8u * (e % 4u))) >> 24u);"
    else:
        zero = "let z = 0.0;"
    if w.fmt == "i8":
        unpack = ["let w0 = Q[row * P.q.z + c * 2u]; let w1 = Q[row * P.q.z + c * 2u + 1u];"] + [
            f"v[{j}] = (f32(i32(w{j // 4} << {24 - 8 * (j % 4)}u) >> 24u) - z) * s;" for j in range(CHUNK)]
    else:
        unpack = ["let w0 = Q[row * P.q.z + c];"] + [
            f"v[{j}] = (f32(i32(w0 << {28 - 4 * j}u) >> 28u) - z) * s;" for j in range(CHUNK)]
    if p.dtype == "f16":
        store = [f"O[base / 2u + {j}u] = pack2x16float(vec2<f32>(v[{2 * j}], v[{2 * j + 1}]));"
                 for j in range(CHUNK // 2)]
    else:
        store = [f"O[base + {j}u] = v[{j}];" for j in range(CHUNK)]
    body = "\n  ".join([zero, "let s = f32(S[row * P.q.y + g]);", f"var v: array<f32, {CHUNK}>;",
                        *unpack, *store])
    src = "\n".join(lines) + f"""

@compute @workgroup_size({WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {{
  let rows = P.shape.x; let dim = P.shape.y; let count = P.shape.z;
  let chunks = dim / {CHUNK}u;
  let t = (wid.x + wid.y * nwg.x) * {WG}u + lid.x;
  if (t >= count * chunks) {{ return; }}
  let i = t / chunks; let c = t % chunks;
  let id = bitcast<i32>(I[(P.shape.w + i) * P.q.w]);
  let row = u32(clamp(id, 0, i32(rows) - 1));
  let g = c * {CHUNK}u / P.q.x;
  let base = i * dim + c * {CHUNK}u;
  {body}
}}
"""
    return src, roles


def plan_quant_embedding(p: QuantEmbeddingProblem, caps: DeviceCaps) -> KernelLaunch:
    """The launch of `p` on `caps`; bindings by role: ids, q (packed words), scale, out, zero."""
    p.check()
    if "f16" in (p.dtype, p.weight.scale_dtype) and not caps.shader_f16:
        raise TypeError(f"quant embedding: output {p.dtype} / scales {p.weight.scale_dtype} need the "
                        "adapter feature 'shader-f16'")
    src, roles = _source(p)
    limit = caps.limit("max-compute-workgroups-per-dimension", 65535)
    groups = grid_within(ceil_div(p.count * (p.dim // CHUNK), WG), limit)
    w = p.weight
    params = (p.rows, p.dim, p.count, p.ids_offset, w.group, p.dim // w.group, w.words_per_row(p.dim),
              p.ids_words)
    read_only = frozenset(i for i, r in enumerate(roles) if r not in ("out", PARAMS))
    name = f"qembedding.{w.fmt}g{w.group}{'z' if w.zero else ''}.{w.scale_dtype}to{p.dtype}"
    return KernelLaunch(name=name, wgsl=src, grid=(*groups, 1), workgroup_size=(WG, 1, 1),
                        bindings=tuple(roles), params=params, read_only=read_only)
