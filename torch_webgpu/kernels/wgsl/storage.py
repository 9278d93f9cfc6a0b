"""How each storage dtype sits in a WebGPU buffer (bound as array<u32>) and is computed in WGSL; torch-free.

Sub-32-bit types are packed into u32 words; a kernel that writes them owns whole words so it never
clobbers a neighbour element. Computation happens in one of three WGSL kinds: f32 (all floats, f16 and
bf16 are widened like torch CPU does), i32 (all integer types up to 32 bits) and bool; int64 is a pair of
u32 words ("i64"). Storage dtypes are named as the kernel library names them: "f32", "f16", "bf16",
"i32", "i16", "i8", "u8", "bool", "i64".
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DtypeInfo:
    """Storage layout and compute kind of one dtype."""

    name: str
    kind: str  # "f32" | "i32" | "bool" | "i64" (vec2<u32>: low word, high word)
    bits: int  # element width in storage
    load: str  # WGSL expression of the element at index `i` of buffer `B`, in `kind`
    store: str  # WGSL expression of the `bits`-wide u32 pattern of value `v` (of `kind`)

    @property
    def per_word(self) -> int:
        """Elements per u32 word (1 for 32-bit types)."""
        return 32 // self.bits

    @property
    def packed(self) -> bool:
        """True for sub-32-bit types that share u32 words."""
        return self.bits < 32


def _small(bits: int, signed: bool, kind: str) -> tuple[str, str]:
    per = 32 // bits
    shift = f"((i % {per}u) * {bits}u)"
    if kind == "bool":
        return f"(extractBits(B[i / {per}u], {shift}, {bits}u) != 0u)", "select(0u, 1u, v)"
    if signed:
        load = f"extractBits(bitcast<i32>(B[i / {per}u]), {shift}, {bits}u)"
    else:
        load = f"i32(extractBits(B[i / {per}u], {shift}, {bits}u))"
    return load, f"(bitcast<u32>(v) & {hex((1 << bits) - 1)}u)"


_F16_LOAD = "unpack2x16float(B[i / 2u])[i % 2u]"
_F16_STORE = "(pack2x16float(vec2<f32>(v, 0.0)) & 0xffffu)"
_BF16_LOAD = "bitcast<f32>(((B[i / 2u] >> ((i % 2u) * 16u)) & 0xffffu) << 16u)"
_BF16_STORE = "bf16_bits(v)"

STORAGE: dict[str, DtypeInfo] = {
    "f32": DtypeInfo("float32", "f32", 32, "bitcast<f32>(B[i])", "bitcast<u32>(v)"),
    "i32": DtypeInfo("int32", "i32", 32, "bitcast<i32>(B[i])", "bitcast<u32>(v)"),
    "f16": DtypeInfo("float16", "f32", 16, _F16_LOAD, _F16_STORE),
    "bf16": DtypeInfo("bfloat16", "f32", 16, _BF16_LOAD, _BF16_STORE),
    "i16": DtypeInfo("int16", "i32", 16, *_small(16, True, "i32")),
    "i8": DtypeInfo("int8", "i32", 8, *_small(8, True, "i32")),
    "u8": DtypeInfo("uint8", "i32", 8, *_small(8, False, "i32")),
    "bool": DtypeInfo("bool", "bool", 8, *_small(8, False, "bool")),
    # int64 is exact for add/sub/mul/neg/comparisons/select (u32-pair arithmetic); "store" is per word
    "i64": DtypeInfo("int64", "i64", 64, "vec2<u32>(B[2u * i], B[2u * i + 1u])", "v"),
}

# int64 indices are read through their low word only (index values are bounded by tensor sizes < 2**31).
INT64_INDEX_LOAD = "bitcast<i32>(B[2u * i])"


def convert(expr: str, src: str, dst: str) -> str:
    """WGSL converting `expr` from compute kind `src` to `dst`."""
    if src == dst:
        return expr
    if src == "i64" or dst == "i64":
        return f"{src}_to_{dst}({expr})"
    if dst == "bool":
        return f"({expr} != {'0.0' if src == 'f32' else '0'})"
    if src == "bool":
        return f"select({'0.0' if dst == 'f32' else '0'}, {'1.0' if dst == 'f32' else '1'}, {expr})"
    return f"{dst}({expr})"


def load_fn(name: str, buffer: str, dtype: str, kind: str) -> str:
    """WGSL `fn name(i: u32) -> kind` reading element i of `buffer` (storage `dtype`) converted to `kind`."""
    info = STORAGE[dtype]
    value = convert(info.load.replace("B[", f"{buffer}["), info.kind, kind)
    return f"fn {name}(i: u32) -> {kind} {{ return {value}; }}\n"
