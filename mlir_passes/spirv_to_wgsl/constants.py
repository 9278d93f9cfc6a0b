"""SPIR-V constants as exact WGSL literals: never a NaN/inf literal, never a lossy decimal."""

from __future__ import annotations

import struct

import numpy as np

from .errors import UnsupportedSpirvError
from .types import Array, Scalar, SpirvType, Vector, value_type

I32_MIN = -(1 << 31)


def _float_bits(x: float, kind: str) -> int:
    if kind == "f32":
        return struct.unpack("<I", struct.pack("<f", x))[0]
    return int(np.frombuffer(np.float16(x).tobytes(), np.uint16)[0])


def _dense_values(attr, elem: Scalar) -> list:
    """Python values (float bits, ints, bools) of a dense attribute, bit-exact (NaN payloads kept)."""
    from iree.compiler import ir

    if elem.kind in ("f32", "f16"):
        array = np.array(ir.DenseFPElementsAttr(attr)).reshape(-1)
        return [int(x) for x in array.view(np.uint32 if elem.kind == "f32" else np.uint16)]
    array = np.array(ir.DenseIntElementsAttr(attr)).reshape(-1)
    return [bool(x) for x in array] if elem.kind == "bool" else [int(x) for x in array]


class ConstantOps:
    """FunctionEmitter mixin: spirv.Constant values (kept symbolic, inlined as literals where used)."""

    def emit_constant(self, op) -> None:
        """spirv.Constant: scalars/vectors stay symbolic; arrays become module `const`s."""
        attr = op.attributes["value"]
        t = value_type(op.results[0])
        if isinstance(t, Scalar):
            self.consts[op.results[0]] = self._scalar_value(str(attr).split(" : ")[0].strip(), t)
            return
        elem = t.elem if isinstance(t, (Vector, Array)) else None
        if not isinstance(elem, Scalar):
            raise UnsupportedSpirvError(f"constant of type {t} is not supported")
        values = _dense_values(attr, elem)
        if isinstance(t, Vector):
            self.consts[op.results[0]] = values
            return
        text = f"{self.ty(t)}({', '.join(self._literal(v, elem) for v in values)})"
        if "nonfinite" in text:
            raise UnsupportedSpirvError("array constant with NaN/inf elements is not supported")
        name = f"c{len(self.module_consts)}"
        self.module_consts.append(f"const {name}: {self.ty(t)} = {text};")
        self.names[op.results[0]] = name

    def _scalar_value(self, text: str, t: Scalar):
        if t.kind == "bool":
            return text == "true"
        if t.kind in ("i32", "u32"):
            return int(text, 0)
        if text.startswith("0x"):
            return int(text, 16)
        return _float_bits(float(text), t.kind)

    def _const_expr(self, value) -> str:
        """spirv.Constant: scalars/vectors stay symbolic; arrays become module `const`s."""
        return self._literal(self.consts[value], value_type(value))

    def _literal(self, v, t: SpirvType) -> str:
        if isinstance(t, Vector):
            vals = v if isinstance(v, list) else [v] * t.count
            return f"{self.ty(t)}({', '.join(self._literal(x, t.elem) for x in vals)})"
        if not isinstance(t, Scalar):
            raise UnsupportedSpirvError(f"constant of type {t}")
        if t.kind == "bool":
            return "true" if v else "false"
        if t.kind == "i32":
            v = (v + (1 << 31)) % (1 << 32) - (1 << 31)
            return "bitcast<i32>(0x80000000u)" if v == I32_MIN else f"{v}i"
        if t.kind == "u32":
            return f"{v % (1 << 32)}u"
        return self._float_literal(v, t.kind)

    def _float_literal(self, bits: int, kind: str) -> str:
        """Exact float constant: decimal when it round-trips, bitcast of the bits otherwise.

        Non-finite values come from a private variable so that no const-expression is ever NaN/inf
        (WGSL makes those a shader-creation error, and Tint aborts on them in SPIR-V input)."""
        if kind == "f32":
            value = np.frombuffer(struct.pack("<I", bits), np.float32)[0]
            mask_exp, mask_man = 0x7F800000, 0x007FFFFF
        else:
            value = np.frombuffer(struct.pack("<H", bits), np.float16)[0]
            mask_exp, mask_man = 0x7C00, 0x03FF
        if bits & mask_exp == mask_exp:
            name = f"nonfinite_{kind}_{bits:x}"
            self.nonfinite[name] = f"0x{bits:x}u"
            return f"bitcast<f32>({name})" if kind == "f32" else f"bitcast<vec2<f16>>({name}).x"
        if bits & mask_exp == 0 and bits & mask_man:  # subnormal: keep the exact bits
            return f"bitcast<f32>(0x{bits:x}u)" if kind == "f32" else f"bitcast<vec2<f16>>(0x{bits:x}u).x"
        # The shortest round-tripping decimal of the largest finite values lies past them (3.4028235e38
        # > FLT_MAX), which WGSL refuses as "cannot be represented": those keep their bits.
        largest = float(np.finfo(np.float32 if kind == "f32" else np.float16).max)
        for text in (np.format_float_positional(value, unique=True, trim="0"),
                     np.format_float_scientific(value, unique=True, trim="0").replace("e+", "e")):
            if len(text) <= 16 and abs(float(text)) <= largest and _float_bits(float(text), kind) == bits:
                return f"{text}{'f' if kind == 'f32' else 'h'}"
        return f"bitcast<f32>(0x{bits:x}u)" if kind == "f32" else f"bitcast<vec2<f16>>(0x{bits:x}u).x"
