"""Value ops: arithmetic (unsigned through bitcast<u32>), NaN-safe float compares, conversions,
composites and vectors, subgroup operations and barriers."""

from __future__ import annotations

from . import op_tables as T
from .errors import UnsupportedSpirvError
from .types import Scalar, SpirvType, attr_ints, scalar_of, value_type, with_scalar


class ValueOps:
    """FunctionEmitter mixin: ops computing values."""

    def emit_binary(self, op) -> None:
        """Integer/float/logical binary op; unsigned ones on bitcast<u32> operands."""
        name = op.name
        a, b = self._operand_exprs(op)
        ta = value_type(op.operands[0])
        if name in T.SHIFTS:
            tb = value_type(op.operands[1])
            if scalar_of(tb).kind == "i32":
                amount = op.operands[1]
                if isinstance(tb, Scalar) and amount in self.consts and amount not in self.names:
                    b = f"{self.consts[amount] % (1 << 32)}u"
                else:
                    b = f"bitcast<{self.ty(with_scalar(tb, 'u32'))}>({b})"
        if name == "spirv.ShiftLeftLogical":
            self.define(op.results[0], f"({a} << {b})")
        elif name in T.UNSIGNED_INFIX and scalar_of(ta).kind == "i32":
            u = self.ty(with_scalar(ta, "u32"))
            res = f"(bitcast<{u}>({a}) {T.UNSIGNED_INFIX[name]} "
            res += b if name in T.SHIFTS else f"bitcast<{u}>({b})"
            res += ")"
            rt = value_type(op.results[0])
            if scalar_of(rt).kind == "i32":
                res = f"bitcast<{self.ty(rt)}>{res}"
            self.define(op.results[0], res)
        else:
            sym = T.INFIX.get(name) or T.UNSIGNED_INFIX[name]
            self.define(op.results[0], f"({a} {sym} {b})")

    def emit_float_compare(self, op) -> None:
        """Integer/float/logical binary op; unsigned ones on bitcast<u32> operands."""
        sym, kind = T.FLOAT_COMPARE[op.name]
        a, b = self._operand_exprs(op)
        t = value_type(op.operands[0])
        either = self._either_nan(op, a, b, t)
        if either == "false":
            self.define(op.results[0], f"({a} {sym} {b})")
        elif kind == "ord":
            self.define(op.results[0], f"(!{either} & ({a} {sym} {b}))")
        else:
            self.define(op.results[0], f"({either} | ({a} {sym} {b}))")

    def _either_nan(self, op, a: str, b: str, t) -> str:
        """Bit-pattern test 'a or b is NaN', leaving out operands that are finite constants."""
        nan = self.helpers.isnan(t)
        pairs = zip((a, b), op.operands, strict=False)
        tests = [f"{nan}({x})" for x, v in pairs if not self._finite_const(v)]
        if not tests:
            return "false"
        return tests[0] if len(tests) == 1 else f"({tests[0]} | {tests[1]})"

    def _finite_const(self, value) -> bool:
        """FOrd*/FUnord* compare with the NaN part tested by bit pattern."""
        if value not in self.consts or value in self.names:
            return False
        vals = self.consts[value]
        kind = scalar_of(value_type(value)).kind
        mask = 0x7F800000 if kind == "f32" else 0x7C00
        return all(v & mask != mask for v in (vals if isinstance(vals, list) else [vals]))

    def emit_gl_unsigned(self, op) -> None:
        """GLSL UMin/UMax/UClamp/FindUMsb on bitcast<u32> operands."""
        t = value_type(op.results[0])
        args = self._operand_exprs(op)
        u = self.ty(with_scalar(value_type(op.operands[0]), "u32"))
        inner = f"{T.GL_UNSIGNED[op.name]}({', '.join(f'bitcast<{u}>({x})' for x in args)})"
        self.define(op.results[0], f"bitcast<{self.ty(t)}>({inner})" if scalar_of(t).kind == "i32" else inner)

    def emit_conversion(self, op) -> None:
        """GLSL UMin/UMax/UClamp/FindUMsb on bitcast<u32> operands."""
        (x,) = self._operand_exprs(op)
        src, dst = value_type(op.operands[0]), value_type(op.results[0])
        dname = self.ty(dst)
        if op.name in ("spirv.ConvertUToF", "spirv.UConvert") and scalar_of(src).kind == "i32":
            x = f"bitcast<{self.ty(with_scalar(src, 'u32'))}>({x})"
        if op.name == "spirv.ConvertFToU" and scalar_of(dst).kind == "i32":
            self.define(op.results[0], f"bitcast<{dname}>({self.ty(with_scalar(dst, 'u32'))}({x}))")
            return
        self.define(op.results[0], f"{dname}({x})")

    def emit_select(self, op) -> None:
        """Numeric conversion (unsigned sources/results through u32)."""
        c, a, b = self._operand_exprs(op)
        self.define(op.results[0], f"select({b}, {a}, {c})")

    def emit_bitcast(self, op) -> None:
        """spirv.Select → select(false, true, cond)."""
        (x,) = self._operand_exprs(op)
        src, dst = value_type(op.operands[0]), value_type(op.results[0])
        if src == dst:
            self.define(op.results[0], x)
        else:
            self.define(op.results[0], f"bitcast<{self.ty(dst)}>({x})")

    def emit_composite_extract(self, op) -> None:
        """spirv.Bitcast → bitcast<T>."""
        (x,) = [self.expr(op.operands[0])]
        path, _ = self._walk(value_type(op.operands[0]), attr_ints(op.attributes["indices"]))
        self.define(op.results[0], f"{x}{path}")

    def emit_composite_construct(self, op) -> None:
        """spirv.CompositeExtract → member/index access."""
        args = self._operand_exprs(op)
        self.define(op.results[0], f"{self.ty(value_type(op.results[0]))}({', '.join(args)})")

    def emit_composite_insert(self, op) -> None:
        """spirv.CompositeConstruct → type constructor."""
        val, obj = self.expr(op.operands[0]), self.expr(op.operands[1])  # (object, composite)
        t = value_type(op.results[0])
        tmp = self.fresh("t")
        self.top.append(f"var {tmp}: {self.ty(t)};")
        self.line(f"{tmp} = {obj};")
        path, _ = self._walk(t, attr_ints(op.attributes["indices"]))
        self.line(f"{tmp}{path} = {val};")
        self.define(op.results[0], tmp)

    def emit_vector_shuffle(self, op) -> None:
        """spirv.CompositeInsert → copy into a var, assign the member."""
        a, b = self.expr(op.operands[0]), self.expr(op.operands[1])
        n = value_type(op.operands[0]).count
        comps = []
        for k in attr_ints(op.attributes["components"]):
            k = 0 if k < 0 or k == 0xFFFFFFFF else k  # undefined component
            comps.append(f"{a}[{k}]" if k < n else f"{b}[{k - n}]")
        self.define(op.results[0], f"{self.ty(value_type(op.results[0]))}({', '.join(comps)})")

    def emit_vector_extract_dynamic(self, op) -> None:
        """spirv.VectorShuffle → constructor of picked components."""
        v, i = self.expr(op.operands[0]), self.expr(op.operands[1])
        self.define(op.results[0], f"{v}[{i}]")

    def emit_vector_insert_dynamic(self, op) -> None:
        """spirv.VectorExtractDynamic → v[i]."""
        v, x, i = (self.expr(o) for o in op.operands)
        t = value_type(op.results[0])
        tmp = self.fresh("t")
        self.top.append(f"var {tmp}: {self.ty(t)};")
        self.line(f"{tmp} = {v};")
        self.line(f"{tmp}[{i}] = {x};")
        self.define(op.results[0], tmp)

    def emit_is_nan_inf(self, op) -> None:
        """spirv.VectorInsertDynamic → copy into a var, assign v[i]."""
        t = value_type(op.operands[0])
        fn = self.helpers.isnan(t) if op.name == "spirv.IsNan" else self.helpers.isinf(t)
        self.define(op.results[0], f"{fn}({self.expr(op.operands[0])})")

    def emit_ordered(self, op) -> None:
        """spirv.IsNan/IsInf → bit-pattern test helper."""
        a, b = self._operand_exprs(op)
        either = self._either_nan(op, a, b, value_type(op.operands[0]))
        self.define(op.results[0], f"!({either})" if op.name == "spirv.Ordered" else either)

    def emit_undef(self, op) -> None:
        """spirv.Ordered/Unordered → bit-pattern NaN tests."""
        self.define(op.results[0], f"{self.ty(value_type(op.results[0]))}()")

    def emit_smod(self, op) -> None:
        """spirv.Undef → the zero value."""
        a, b = self._operand_exprs(op)
        if op.name == "spirv.FMod":  # sign of the divisor
            self.define(op.results[0], f"({a} - {b} * floor({a} / {b}))")
            return
        r = self.define_tmp(f"({a} % {b})", value_type(op.results[0]))
        zero = f"{self.ty(value_type(op.results[0]))}()"
        fix = f"(({r} != {zero}) & (({r} < {zero}) != ({b} < {zero})))"
        self.define(op.results[0], f"select({r}, {r} + {b}, {fix})")

    def define_tmp(self, expr: str, t: SpirvType) -> str:
        """SMod/FMod: remainder with the sign of the divisor."""
        name = self.fresh("k")
        self.line(f"let {name}: {self.ty(t)} = {expr};")
        return name

    def emit_subgroup(self, op) -> None:
        """GroupNonUniform* at subgroup scope → WGSL subgroup builtins (needs the `subgroups` feature)."""
        name = op.name
        scope = str(op.attributes["execution_scope"]) if "execution_scope" in op.attributes else ""
        if "Subgroup" not in scope:
            raise UnsupportedSpirvError(f"{name} at scope {scope or '?'}: only subgroup scope maps to WGSL")
        self.uses_subgroups = True
        args = [self.expr(v) for v in op.operands]
        result_t = value_type(op.results[0]) if len(op.results) else None
        if name in T.GROUP_ARITHMETIC or name in T.GROUP_UNSIGNED:
            group = str(op.attributes["group_operation"]) if "group_operation" in op.attributes else "Reduce"
            if "ClusteredReduce" in group or len(args) != 1:
                raise UnsupportedSpirvError(f"{name} with {group}: clustered operations have no WGSL builtin")
            if name in T.GROUP_UNSIGNED:
                u = self.ty(with_scalar(result_t, "u32"))
                call = f"{T.GROUP_UNSIGNED[name]}(bitcast<{u}>({args[0]}))"
                self.define(op.results[0], f"bitcast<{self.ty(result_t)}>({call})")
                return
            reduce, inclusive, exclusive = T.GROUP_ARITHMETIC[name]
            fn = inclusive if "InclusiveScan" in group else exclusive if "ExclusiveScan" in group else reduce
            if fn is None:
                raise UnsupportedSpirvError(f"{name} with {group} has no WGSL builtin")
            self.define(op.results[0], f"{fn}({args[0]})")
        elif name in T.GROUP_SHUFFLE:
            lane = op.operands[1]
            index = (f"{self.consts[lane] % (1 << 32)}u" if lane in self.consts and lane not in self.names
                     else f"bitcast<u32>({args[1]})")
            self.define(op.results[0], f"{T.GROUP_SHUFFLE[name]}({args[0]}, {index})")
        elif name in T.GROUP_OTHER:
            call = f"{T.GROUP_OTHER[name]}({', '.join(args)})"
            if name == "spirv.GroupNonUniformBallot":
                call = f"bitcast<{self.ty(result_t)}>({call})"
            self.define(op.results[0], call)
        else:
            raise UnsupportedSpirvError(f"SPIR-V op {name} is not supported by the WGSL translator")

    def emit_barrier(self, op) -> None:
        """A `let` temporary holding `expr`."""
        semantics = str(op.attributes["memory_semantics"]) if "memory_semantics" in op.attributes else ""
        if "UniformMemory" in semantics:
            self.line("storageBarrier();")
        if "WorkgroupMemory" in semantics or "UniformMemory" not in semantics:
            self.line("workgroupBarrier();")
