"""WGSL spelling of SPIR-V types, struct declarations and NaN-safe helper functions."""

from __future__ import annotations

from .errors import UnsupportedSpirvError
from .types import Array, Scalar, SpirvType, Struct, Vector, size_align


class TypeNamer:
    """Names WGSL types; declares one WGSL struct per distinct SPIR-V struct."""

    def __init__(self) -> None:
        self.structs: dict[Struct, str] = {}
        self.declarations: list[str] = []
        self.uses_f16 = False

    def name(self, t: SpirvType) -> str:
        """The WGSL type name of `t`."""
        if isinstance(t, Scalar):
            if t.kind == "f16":
                self.uses_f16 = True
            return t.kind
        if isinstance(t, Vector):
            return f"vec{t.count}<{self.name(t.elem)}>"
        if isinstance(t, Array):
            if t.stride is not None and t.stride != size_align(t)[0] // (t.count or 1):
                raise UnsupportedSpirvError(
                    f"array of {t.elem} with stride {t.stride} differs from WGSL's natural stride")
            elem = self.name(t.elem)
            return f"array<{elem}>" if t.count is None else f"array<{elem}, {t.count}>"
        if isinstance(t, Struct):
            return self._struct(t)
        raise UnsupportedSpirvError(f"type {t} cannot be a WGSL value type")

    def _struct(self, t: Struct) -> str:
        if t in self.structs:
            return self.structs[t]
        members = [self.name(m) for m in t.members]
        offset = 0
        for m, declared in zip(t.members, t.offsets, strict=False):
            size, align = size_align(m) if declared is not None else (0, 1)
            offset = -(-offset // align) * align
            if declared is not None and declared != offset:
                raise UnsupportedSpirvError(f"struct member at offset {declared} differs from WGSL layout")
            offset += size
        name = f"S{len(self.structs)}"
        self.structs[t] = name
        body = "".join(f"  m{i}: {m},\n" for i, m in enumerate(members))
        self.declarations.append(f"struct {name} {{\n{body}}}\n")
        return name


def bits_type(t: Scalar | Vector) -> str:
    """The u32 (vector) type an f32 (vector) is bitcast to for bit tests."""
    return f"vec{t.count}<u32>" if isinstance(t, Vector) else "u32"


class Helpers:
    """WGSL helper functions (NaN tests, NaN-aware min/max) emitted once per type on demand."""

    def __init__(self, namer: TypeNamer):
        self.namer = namer
        self.code: dict[str, str] = {}

    def _suffix(self, t: Scalar | Vector) -> str:
        return f"v{t.count}{t.elem.kind}" if isinstance(t, Vector) else t.kind

    def _bool(self, t: Scalar | Vector) -> str:
        return f"vec{t.count}<bool>" if isinstance(t, Vector) else "bool"

    def _bit_test(self, kind: str, t: Scalar | Vector) -> str:
        """Helper testing a float's exponent/mantissa bits: kind is 'isnan' or 'isinf'."""
        name = f"{kind}_{self._suffix(t)}"
        if name in self.code:
            return name
        ty, bty = self.namer.name(t), self._bool(t)
        scalar = t.elem if isinstance(t, Vector) else t
        if scalar.kind == "f16":
            if isinstance(t, Vector):
                inner = self._bit_test(kind, scalar)
                comps = ", ".join(f"{inner}(x[{i}])" for i in range(t.count))
                body = f"return {bty}({comps});"
            else:
                op = ">" if kind == "isnan" else "=="
                body = f"return (bitcast<u32>(vec2<f16>(x, 0.0h)) & 0x7fffu) {op} 0x7c00u;"
        else:
            u = bits_type(t)
            op = ">" if kind == "isnan" else "=="
            body = f"return (bitcast<{u}>(x) & {u}(0x7fffffffu)) {op} {u}(0x7f800000u);"
        self.code[name] = f"fn {name}(x: {ty}) -> {bty} {{ {body} }}\n"
        return name

    def isnan(self, t: Scalar | Vector) -> str:
        """Name of the bit-pattern NaN test for `t`."""
        return self._bit_test("isnan", t)

    def isinf(self, t: Scalar | Vector) -> str:
        """Name of the bit-pattern infinity test for `t`."""
        return self._bit_test("isinf", t)

    def nan_aware(self, kind: str, t: Scalar | Vector) -> str:
        """NMax/NMin/NClamp for `t`: a NaN operand loses to a number (GLSL.std.450 semantics)."""
        name = f"{kind}_{self._suffix(t)}"
        if name in self.code:
            return name
        ty, nan = self.namer.name(t), self.isnan(t)
        if kind == "nclamp":
            nmax, nmin = self.nan_aware("nmax", t), self.nan_aware("nmin", t)
            self.code[name] = (f"fn {name}(x: {ty}, lo: {ty}, hi: {ty}) -> {ty} "
                               f"{{ return {nmin}({nmax}(x, lo), hi); }}\n")
            return name
        fn = "max" if kind == "nmax" else "min"
        self.code[name] = (f"fn {name}(a: {ty}, b: {ty}) -> {ty} "
                           f"{{ return select(select({fn}(a, b), a, {nan}(b)), b, {nan}(a)); }}\n")
        return name
