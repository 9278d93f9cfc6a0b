"""WGSL building blocks for kernels that read and write strided webgpu tensors of any device dtype.

Every buffer is bound whole as `array<u32>`; elements are addressed by element index (offset + sum of
coordinate * stride, all in elements). Sub-32-bit types live packed in u32 words, so a kernel writing
int8/uint8/bool/int16/float16/bfloat16 elements updates only its element's bits with two atomics
(`atomicAnd` to clear, `atomicOr` to set): neighbours written by other invocations, or not part of the
view at all, are never clobbered. int64 elements are two words (low, high); shaders have no 64-bit
integers, so arithmetic on them happens in i32 with sign extension.

Values travel between load, convert and store as `vec2<u32>` raw bit patterns (low word, high word).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .dtypes import info as dtype_info
from .tensor_buffers import MAX_DIMS

WORKGROUP = 256
HEADER = 4  # [numel, ndim, offset A, offset B] precede sizes and strides in every parameter block

_MASK = {1: "0xffu", 2: "0xffffu"}


def is_packed(dtype: torch.dtype) -> bool:
    """True for dtypes narrower than a u32 word."""
    return dtype_info(dtype).size < 4


def dst_decl(binding: int, dtype: torch.dtype, name: str = "D") -> str:
    """Declaration of a written buffer: atomic words for packed dtypes, plain words otherwise."""
    elem = "atomic<u32>" if is_packed(dtype) else "u32"
    return f"@group(0) @binding({binding}) var<storage, read_write> {name}: array<{elem}>;"


def _raw_bodies(dtype: torch.dtype, buf: str) -> tuple[str, str]:
    """(load body, store body) moving the raw bits of element e of `buf` to/from a vec2<u32> (v)."""
    size = dtype_info(dtype).size
    if size == 4:
        return f"return vec2<u32>({buf}[e], 0u);", f"{buf}[e] = v.x;"
    if size == 8:
        return (f"return vec2<u32>({buf}[2u * e], {buf}[2u * e + 1u]);",
                f"{buf}[2u * e] = v.x; {buf}[2u * e + 1u] = v.y;")
    per, mask = 4 // size, _MASK[size]
    word, shift = f"e / {per}u", f"((e % {per}u) * {size * 8}u)"
    # a packed store owns only its bits of the shared word (atomics: neighbours may be written meanwhile)
    return (f"return vec2<u32>(({buf}[{word}] >> {shift}) & {mask}, 0u);",
            f"let w = {word}; let sh = {shift};\n  atomicAnd(&{buf}[w], ~({mask} << sh));\n"
            f"  atomicOr(&{buf}[w], (v.x & {mask}) << sh);")


def load_raw(dtype: torch.dtype, buf: str = "S", fn: str = "load_raw") -> str:
    """WGSL `fn load_raw(e: u32) -> vec2<u32>`: the raw bits of element e of `buf`."""
    return f"fn {fn}(e: u32) -> vec2<u32> {{ {_raw_bodies(dtype, buf)[0]} }}\n"


def store_raw(dtype: torch.dtype, buf: str = "D", fn: str = "store_raw") -> str:
    """WGSL `fn store_raw(e: u32, v: vec2<u32>)`: write element e of `buf` without touching neighbours."""
    return f"fn {fn}(e: u32, v: vec2<u32>) {{\n  {_raw_bodies(dtype, buf)[1]}\n}}\n"


# Compute kinds: "f" (f32), "i" (i32), "l" (int64 as raw (lo, hi)), "b" (bool as u32 0/1).
def compute_kind(dtype: torch.dtype) -> str:
    """How values of `dtype` are computed with in WGSL: 'f' f32, 'i' i32, 'l' int64 bits, 'b' bool."""
    kind = dtype_info(dtype).kind
    if dtype == torch.int64:
        return "l"
    return {"float": "f", "int": "i", "uint": "i", "bool": "b"}[kind]


def decode(dtype: torch.dtype, fn: str = "decode") -> str:
    """WGSL `fn decode(r: vec2<u32>) -> <kind type>` turning raw bits of `dtype` into a compute value."""
    if dtype == torch.float32:
        return f"fn {fn}(r: vec2<u32>) -> f32 {{ return bitcast<f32>(r.x); }}\n"
    if dtype == torch.float16:
        return f"fn {fn}(r: vec2<u32>) -> f32 {{ return unpack2x16float(r.x).x; }}\n"
    if dtype == torch.bfloat16:
        return f"fn {fn}(r: vec2<u32>) -> f32 {{ return bitcast<f32>(r.x << 16u); }}\n"
    if dtype == torch.int64:
        return f"fn {fn}(r: vec2<u32>) -> vec2<u32> {{ return r; }}\n"
    if dtype == torch.bool:
        return f"fn {fn}(r: vec2<u32>) -> u32 {{ return select(0u, 1u, r.x != 0u); }}\n"
    shift = {torch.int32: 0, torch.int16: 16, torch.int8: 24, torch.uint8: None}[dtype]
    if shift is None:
        return f"fn {fn}(r: vec2<u32>) -> i32 {{ return i32(r.x); }}\n"
    return f"fn {fn}(r: vec2<u32>) -> i32 {{ return bitcast<i32>(r.x << {shift}u) >> {shift}u; }}\n"


KIND_TYPE = {"f": "f32", "i": "i32", "l": "vec2<u32>", "b": "u32"}

# Conversions between compute kinds (torch semantics: float->int truncates, int narrowing wraps).
CONVERT_PRELUDE = """
const TWO32: f32 = 4294967296.0;
fn l_from_i(v: i32) -> vec2<u32> { return vec2<u32>(bitcast<u32>(v), select(0u, 0xffffffffu, v < 0)); }
fn l_from_f(v: f32) -> vec2<u32> {
  if (abs(v) < 2147483648.0) { return l_from_i(i32(v)); }
  let t = trunc(v);
  let hi = floor(t / TWO32);
  return vec2<u32>(u32(t - hi * TWO32), bitcast<u32>(i32(hi)));
}
fn f_from_l(v: vec2<u32>) -> f32 {
  // Values that fit in i32 convert exactly; f32(lo) alone would round before the high part cancels.
  if (v.y == select(0u, 0xffffffffu, bitcast<i32>(v.x) < 0)) { return f32(bitcast<i32>(v.x)); }
  return f32(bitcast<i32>(v.y)) * TWO32 + f32(v.x);
}
fn bf16_bits(v: f32) -> u32 {
  if (v != v) { return 0x7fc0u; }
  let b = bitcast<u32>(v);
  return (b + 0x7fffu + ((b >> 16u) & 1u)) >> 16u;
}
"""


def convert_expr(expr: str, src: str, dst: str) -> str:
    """WGSL converting `expr` of compute kind `src` to kind `dst`."""
    if src == dst:
        return expr
    table = {
        ("f", "i"): "i32({x})", ("f", "l"): "l_from_f({x})", ("f", "b"): "select(0u, 1u, {x} != 0.0)",
        ("i", "f"): "f32({x})", ("i", "l"): "l_from_i({x})", ("i", "b"): "select(0u, 1u, {x} != 0)",
        ("l", "f"): "f_from_l({x})", ("l", "i"): "bitcast<i32>(({x}).x)",
        ("l", "b"): "select(0u, 1u, any(({x}) != vec2<u32>(0u)))",
        ("b", "f"): "f32({x})", ("b", "i"): "i32({x})", ("b", "l"): "vec2<u32>({x}, 0u)",
    }
    return table[(src, dst)].format(x=expr)


def encode(dtype: torch.dtype, fn: str = "encode") -> str:
    """WGSL `fn encode(v: <kind type>) -> vec2<u32>`: raw bits of a compute value stored as `dtype`."""
    kind = compute_kind(dtype)
    arg = KIND_TYPE[kind]
    if dtype == torch.float32:
        body = "vec2<u32>(bitcast<u32>(v), 0u)"
    elif dtype == torch.float16:
        body = "vec2<u32>(pack2x16float(vec2<f32>(v, 0.0)) & 0xffffu, 0u)"
    elif dtype == torch.bfloat16:
        body = "vec2<u32>(bf16_bits(v), 0u)"
    elif dtype == torch.int64:
        body = "v"
    elif dtype == torch.bool:
        body = "vec2<u32>(v, 0u)"
    else:
        size = dtype_info(dtype).size
        mask = _MASK.get(size, "0xffffffffu")
        body = f"vec2<u32>(bitcast<u32>(v) & {mask}, 0u)"
    return f"fn {fn}(v: {arg}) -> vec2<u32> {{ return {body}; }}\n"


INDEX_HELPERS = f"""
// Element index of logical index `li` for the tensor whose offset is P[off] and strides P[st..st+8].
fn strided_index(li: u32, off: u32, st: u32) -> u32 {{
  var rem = li;
  var e = P[off];
  for (var d = i32(P[1]) - 1; d >= 0; d--) {{
    let n = P[{HEADER}u + u32(d)];
    e += (rem % n) * P[st + u32(d)];
    rem = rem / n;
  }}
  return e;
}}
fn linear_id(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {{ return gid.x + gid.y * nwg.x * {WORKGROUP}u; }}
"""


def grid(work: int) -> tuple[int, int, int]:
    """Workgroup counts covering `work` invocations (2-D once past 65535 workgroups)."""
    groups = -(-work // WORKGROUP)
    if groups <= 65535:
        return (groups, 1, 1)
    return (65535, -(-groups // 65535), 1)


def coalesce(shape: Sequence[int], stride_sets: Sequence[Sequence[int]]) -> tuple[list[int], list[list[int]]]:
    """Drop size-1 dims and merge neighbours that are contiguous in every stride set (row-major order)."""
    out_shape: list[int] = []
    out_strides: list[list[int]] = [[] for _ in stride_sets]
    for d, n in enumerate(shape):
        if n == 1:
            continue
        if out_shape and all(st[-1] == s[d] * n for st, s in zip(out_strides, stride_sets, strict=True)):
            out_shape[-1] *= n
            for st, s in zip(out_strides, stride_sets, strict=True):
                st[-1] = s[d]
            continue
        out_shape.append(n)
        for st, s in zip(out_strides, stride_sets, strict=True):
            st.append(s[d])
    return out_shape, out_strides


@dataclass(frozen=True)
class Layout:
    """Coalesced iteration space shared by the tensors of one kernel launch."""

    numel: int
    sizes: list[int]
    strides: list[list[int]]  # one stride list per tensor, in elements

    def words(self, offsets: Sequence[int]) -> list[int]:
        """Parameter words: [numel, ndim, offset A, offset B, sizes[8], strides[8] per tensor]."""
        nd = len(self.sizes)
        pad = [0] * (MAX_DIMS - nd)
        offs = list(offsets) + [0] * (2 - len(offsets))
        words = [self.numel, nd, *offs[:2], *self.sizes, *([1] * (MAX_DIMS - nd))]
        for st in self.strides:
            words += [*st, *pad]
        for v in words:
            if v >= 1 << 32 or v < 0:
                raise ValueError(f"tensor too large for 32-bit WebGPU indexing (value {v})")
        return words


def layout(shape: Sequence[int], *stride_sets: Sequence[int], op: str) -> Layout:
    """The coalesced layout of tensors of one `shape` with the given strides; at most 8 dims remain."""
    numel = 1
    for n in shape:
        numel *= n
    sizes, strides = coalesce(shape, stride_sets)
    if len(sizes) > MAX_DIMS:
        raise NotImplementedError(f"webgpu: '{op}' supports at most {MAX_DIMS} non-mergeable dims, "
                                  f"got shape {tuple(shape)}")
    return Layout(numel, sizes, strides)
