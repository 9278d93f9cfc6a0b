"""SPIR-V dialect types parsed from their textual form, and their WGSL spelling and layout."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from .errors import UnsupportedSpirvError


@dataclass(frozen=True)
class Scalar:
    """i1 (bool), i32, u32, f16 or f32."""

    kind: str  # 'bool' | 'i32' | 'u32' | 'f16' | 'f32'


@dataclass(frozen=True)
class Vector:
    """vecN of a scalar."""

    count: int
    elem: Scalar


@dataclass(frozen=True)
class Array:
    """Fixed (`count` set) or runtime-sized (`count` None) array with an optional explicit stride."""

    elem: SpirvType
    count: int | None
    stride: int | None


@dataclass(frozen=True)
class Struct:
    """Struct with member offsets (None when the struct has no explicit layout)."""

    members: tuple[SpirvType, ...]
    offsets: tuple[int | None, ...]


@dataclass(frozen=True)
class Pointer:
    """Pointer to `pointee` in a storage class."""

    pointee: SpirvType
    storage: str


SpirvType = Scalar | Vector | Array | Struct | Pointer

_SCALARS = {"i1": "bool", "i32": "i32", "si32": "i32", "ui32": "u32", "f16": "f16", "f32": "f32"}
_WIDE = {"i8", "i16", "i64", "si8", "si16", "si64", "ui8", "ui16", "ui64", "f64", "bf16", "index"}


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def error(self, what: str) -> UnsupportedSpirvError:
        return UnsupportedSpirvError(f"cannot parse SPIR-V type {self.text!r} at {self.pos}: {what}")

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] == " ":
            self.pos += 1

    def eat(self, token: str) -> bool:
        self.skip()
        if self.text.startswith(token, self.pos):
            self.pos += len(token)
            return True
        return False

    def expect(self, token: str) -> None:
        if not self.eat(token):
            raise self.error(f"expected {token!r}")

    def word(self) -> str:
        self.skip()
        start = self.pos
        while self.pos < len(self.text) and (self.text[self.pos].isalnum() or self.text[self.pos] in "_"):
            self.pos += 1
        if start == self.pos:
            raise self.error("expected a word")
        return self.text[start:self.pos]

    def number(self) -> int:
        return int(self.word())

    def parse(self) -> SpirvType:
        if self.eat("!spirv.ptr<"):
            pointee = self.parse()
            self.expect(",")
            storage = self.word()
            self.expect(">")
            return Pointer(pointee, storage)
        if self.eat("!spirv.struct<"):
            self.expect("(")
            members, offsets = [], []
            while not self.eat(")"):
                members.append(self.parse())
                offsets.append(self.number() if self.eat("[") else None)
                if offsets[-1] is not None:
                    self.expect("]")
                self.eat(",")
            self.skip()
            while not self.eat(">"):  # struct decorations (Block, ...) carry no layout
                self.pos += 1
            return Struct(tuple(members), tuple(offsets))
        if self.eat("!spirv.array<"):
            count = self.number()
            self.expect("x")
            elem = self.parse()
            stride = self._stride()
            return Array(elem, count, stride)
        if self.eat("!spirv.rtarray<"):
            elem = self.parse()
            return Array(elem, None, self._stride())
        if self.eat("vector<"):
            shape = self.word()  # e.g. "4xf32"
            count, _, scalar = shape.partition("x")
            self.expect(">")
            return Vector(int(count), self._scalar(scalar))
        return self._scalar(self.word())

    def _stride(self) -> int | None:
        stride = None
        if self.eat(","):
            self.expect("stride")
            self.expect("=")
            stride = self.number()
        self.expect(">")
        return stride

    def _scalar(self, name: str) -> Scalar:
        if name in _SCALARS:
            return Scalar(_SCALARS[name])
        if name in _WIDE:
            raise UnsupportedSpirvError(
                f"SPIR-V type {name} has no WebGPU equivalent (WGSL has 32-bit ints and f16/f32 only); "
                "compile with --iree-input-demote-i64-to-i32 / --iree-input-demote-f64-to-f32")
        raise self.error(f"unknown scalar {name!r}")


@lru_cache(maxsize=4096)
def parse_type(text: str) -> SpirvType:
    """Parse the textual form of a spirv-dialect type."""
    parser = _Parser(text.strip())
    result = parser.parse()
    parser.skip()
    if parser.pos != len(parser.text):
        raise parser.error("trailing characters")
    return result


def scalar_of(t: SpirvType) -> Scalar:
    """The scalar element of a scalar or vector type."""
    if isinstance(t, Scalar):
        return t
    if isinstance(t, Vector):
        return t.elem
    raise UnsupportedSpirvError(f"expected a scalar or vector type, got {t}")


def with_scalar(t: SpirvType, kind: str) -> Scalar | Vector:
    """The same shape as `t` (scalar or vector) with scalar `kind`."""
    if isinstance(t, Vector):
        return Vector(t.count, Scalar(kind))
    return Scalar(kind)


def size_align(t: SpirvType) -> tuple[int, int]:
    """WGSL host-shareable size and alignment of `t`."""
    if isinstance(t, Scalar):
        if t.kind == "bool":
            raise UnsupportedSpirvError("bool values cannot live in host-shareable memory in WGSL")
        return (2, 2) if t.kind == "f16" else (4, 4)
    if isinstance(t, Vector):
        size, _ = size_align(t.elem)
        align = size * (4 if t.count == 3 else t.count)
        return size * t.count, align
    if isinstance(t, Array):
        size, align = size_align(t.elem)
        stride = -(-size // align) * align
        return stride * (t.count or 1), align
    if isinstance(t, Struct):
        offset, align = 0, 1
        for m in t.members:
            s, a = size_align(m)
            offset = -(-offset // a) * a + s
            align = max(align, a)
        return -(-offset // align) * align, align
    raise UnsupportedSpirvError(f"type {t} has no size")


def value_type(value) -> SpirvType:
    """The parsed type of an MLIR value."""
    return parse_type(str(value.type))


def attr_ints(attr) -> list[int]:
    """The integers of an MLIR array attribute of integer attributes."""
    return [int(str(a).split(":")[0]) for a in attr]
