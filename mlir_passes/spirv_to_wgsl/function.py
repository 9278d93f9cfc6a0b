"""Translation of one spirv.func body (structured control flow, values, memory) into WGSL statements."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from . import op_tables as T
from .errors import UnsupportedSpirvError
from .resources import GlobalVar
from .types import (
    Array,
    Pointer,
    Scalar,
    SpirvType,
    Struct,
    Vector,
    parse_type,
    scalar_of,
    size_align,
    with_scalar,
)
from .wgsl_types import Helpers, TypeNamer

I32_MIN = -(1 << 31)


@dataclass(frozen=True)
class Ptr:
    """A symbolic pointer: a root variable and the access-chain indices (values or ints) into it."""

    root: GlobalVar | LocalVar
    indices: tuple
    pointee: SpirvType


@dataclass
class LocalVar:
    """A Function-storage spirv.Variable."""

    name: str
    pointee: SpirvType
    kind: str = "function"


@dataclass
class _Construct:
    """The structured construct (loop or selection) whose blocks are being emitted."""

    kind: str  # 'loop' | 'selection'
    merge: object  # the merge Block
    merge_vars: list[str]
    header: object = None  # loop header Block
    header_vars: list[str] = field(default_factory=list)


def _ints(attr) -> list[int]:
    return [int(str(a).split(":")[0]) for a in attr]


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


def _op_type(value) -> SpirvType:
    return parse_type(str(value.type))


class FunctionEmitter:
    """Emits the WGSL body of one entry point; run twice: the first run finds values to hoist into vars."""

    def __init__(self, func_op, globals_: dict[str, GlobalVar], namer: TypeNamer, helpers: Helpers,
                 push_constants: dict[int, int] | None, hoisted: frozenset = frozenset()):
        self.func = func_op
        self.globals = globals_
        self.namer = namer
        self.helpers = helpers
        self.push_constants = push_constants
        self.hoisted = hoisted
        self.lines: list[str] = []
        self.top: list[str] = []  # function-scope declarations (hoisted values, Function variables)
        self.names: dict = {}  # Value → WGSL expression
        self.consts: dict = {}  # Value → Python constant (ints, bools, float bits)
        self.ptrs: dict = {}  # Value → Ptr
        self.def_scope: dict = {}
        self.escaping: set = set()
        self.scope: tuple = ()
        self.scope_counter = 0
        self.counter = 0
        self.indent = 1
        self.used_builtins: set[str] = set()
        self.used_push = False
        self.nonfinite: dict[str, str] = {}  # private var name → u32 bits literal
        self.emitted_blocks: set = set()
        self.module_consts: list[str] = []  # module-scope `const` arrays
        self.uses_subgroups = False

    # ---- output helpers ------------------------------------------------------------------------
    def line(self, text: str) -> None:
        self.lines.append("  " * self.indent + text)

    def open(self, text: str) -> None:
        self.line(text)
        self.indent += 1
        self.scope_counter += 1
        self.scope = self.scope + (self.scope_counter,)

    def close(self, text: str = "}") -> None:
        self.indent -= 1
        self.scope = self.scope[:-1]
        self.line(text)

    def fresh(self, prefix: str = "v") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def ty(self, t: SpirvType) -> str:
        return self.namer.name(t)

    # ---- values --------------------------------------------------------------------------------
    def expr(self, value) -> str:
        """WGSL expression of an SSA value, recording where it is used (for let/var hoisting)."""
        if value in self.consts and value not in self.names:
            return self._const_expr(value)
        if value not in self.names:
            raise UnsupportedSpirvError(f"value {value.get_name()} used before its definition was emitted")
        scope = self.def_scope.get(value)
        if scope is not None and self.scope[:len(scope)] != scope:
            self.escaping.add(value)
        return self.names[value]

    def define(self, value, expr: str, t: SpirvType | None = None) -> str:
        """Bind a result to `expr` with `let` (or assign its hoisted `var`); returns its name."""
        t = t or _op_type(value)
        name = self.fresh()
        if value in self.hoisted:
            self.top.append(f"var {name}: {self.ty(t)};")
            self.line(f"{name} = {expr};")
        else:
            self.line(f"let {name}: {self.ty(t)} = {expr};")
        self.names[value] = name
        self.def_scope[value] = self.scope
        return name

    def _const_expr(self, value) -> str:
        return self._literal(self.consts[value], _op_type(value))

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
            mask_exp, mask_man, width = 0x7F800000, 0x007FFFFF, "u32"
        else:
            value = np.frombuffer(struct.pack("<H", bits), np.float16)[0]
            mask_exp, mask_man, width = 0x7C00, 0x03FF, "u16"
        if bits & mask_exp == mask_exp:
            name = f"nonfinite_{kind}_{bits:x}"
            self.nonfinite[name] = f"0x{bits:x}u"
            return f"bitcast<f32>({name})" if kind == "f32" else f"bitcast<vec2<f16>>({name}).x"
        if bits & mask_exp == 0 and bits & mask_man:  # subnormal: keep the exact bits
            return f"bitcast<f32>(0x{bits:x}u)" if kind == "f32" else f"bitcast<vec2<f16>>(0x{bits:x}u).x"
        del width
        for text in (np.format_float_positional(value, unique=True, trim="0"),
                     np.format_float_scientific(value, unique=True, trim="0").replace("e+", "e")):
            if len(text) <= 16 and _float_bits(float(text), kind) == bits:
                return f"{text}{'f' if kind == 'f32' else 'h'}"
        return f"bitcast<f32>(0x{bits:x}u)" if kind == "f32" else f"bitcast<vec2<f16>>(0x{bits:x}u).x"

    # ---- entry ---------------------------------------------------------------------------------
    def emit(self) -> None:
        """Emit the whole function body."""
        ops = list(self.func.regions[0].blocks[0].operations)
        for i, op in enumerate(ops):
            self.emit_op(op, None, last_in_function=i == len(ops) - 1)

    # ---- control flow --------------------------------------------------------------------------
    def emit_chain(self, block, ctx: _Construct) -> None:
        """Emit a block and, through its terminator, the blocks it branches to inside `ctx`."""
        if block in self.emitted_blocks:
            raise UnsupportedSpirvError("unstructured control flow: a block is reached twice")
        self.emitted_blocks.add(block)
        ops = list(block.operations)
        for op in ops[:-1]:
            self.emit_op(op, ctx)
        self.emit_terminator(ops[-1], ctx)

    def _succ_args(self, term) -> tuple[list, list]:
        """(true-target operands, false-target operands) of a spirv.BranchConditional."""
        sizes = _ints(term.attributes["operandSegmentSizes"])
        operands = list(term.operands)
        t_args = operands[sizes[0]:sizes[0] + sizes[1]]
        f_args = operands[sizes[0] + sizes[1]:]
        return t_args, f_args

    def emit_terminator(self, term, ctx: _Construct) -> None:
        name = term.name
        if name == "spirv.Branch":
            self.emit_branch(term.successors[0], list(term.operands), ctx)
        elif name == "spirv.BranchConditional":
            cond = self.expr(term.operands[0])
            t_block, f_block = term.successors
            t_args, f_args = self._succ_args(term)
            exits = (ctx.merge,) if ctx.kind == "loop" else ()
            if f_block in exits:
                self.open(f"if (!({cond})) {{")
                self.emit_branch(f_block, f_args, ctx)
                self.close()
                self.emit_branch(t_block, t_args, ctx)
            elif t_block in exits:
                self.open(f"if ({cond}) {{")
                self.emit_branch(t_block, t_args, ctx)
                self.close()
                self.emit_branch(f_block, f_args, ctx)
            elif f_block == ctx.merge and not ctx.merge_vars:
                self.open(f"if ({cond}) {{")
                self.emit_branch(t_block, t_args, ctx)
                self.close()
            else:
                self.open(f"if ({cond}) {{")
                self.emit_branch(t_block, t_args, ctx)
                self.close("} else {")
                self.indent += 1
                self.scope_counter += 1
                self.scope = self.scope + (self.scope_counter,)
                self.emit_branch(f_block, f_args, ctx)
                self.close()
        elif name == "spirv.Return":
            self.line("return;")
        elif name == "spirv.Unreachable":
            self.line("return;")
        else:
            raise UnsupportedSpirvError(f"terminator {name} inside a structured construct is not supported")

    def emit_branch(self, target, args: list, ctx: _Construct) -> None:
        exprs = [self.expr(a) for a in args]
        if target == ctx.merge:
            for var, e in zip(ctx.merge_vars, exprs, strict=False):
                self.line(f"{var} = {e};")
            if ctx.kind == "loop":
                self.line("break;")
        elif ctx.kind == "loop" and target == ctx.header:
            for var, e in zip(ctx.header_vars, exprs, strict=False):
                self.line(f"{var} = {e};")
            self.line("continue;")
        else:
            for arg, e in zip(target.arguments, exprs, strict=False):
                self.define(arg, e, _op_type(arg))
            self.emit_chain(target, ctx)

    def _merge_block(self, region):
        for block in region.blocks:
            ops = list(block.operations)
            if ops and ops[-1].name == "spirv.mlir.merge":
                return block
        raise UnsupportedSpirvError("structured construct without a spirv.mlir.merge block")

    def _declare_vars(self, values) -> list[str]:
        names = []
        for v in values:
            name = self.fresh("m")
            self.top.append(f"var {name}: {self.ty(_op_type(v))};")
            names.append(name)
        return names

    def _after_construct(self, op, merge, merge_vars: list[str]) -> None:
        """Bind merge-block arguments, emit the merge block's ops, bind the construct's results."""
        for arg, var in zip(merge.arguments, merge_vars, strict=False):
            self.define(arg, var, _op_type(arg))
        ops = list(merge.operations)
        for inner in ops[:-1]:
            self.emit_op(inner, None)
        for result, operand in zip(op.results, ops[-1].operands, strict=False):
            self.define(result, self.expr(operand), _op_type(result))

    def emit_loop(self, op) -> None:
        region = op.regions[0]
        blocks = list(region.blocks)
        entry = blocks[0]
        merge = self._merge_block(region)
        entry_ops = list(entry.operations)
        for inner in entry_ops[:-1]:
            self.emit_op(inner, None)
        term = entry_ops[-1]
        if term.name != "spirv.Branch":
            raise UnsupportedSpirvError("spirv.mlir.loop entry block must end in spirv.Branch to the header")
        header = term.successors[0]
        header_vars = []
        for arg, init in zip(header.arguments, term.operands, strict=False):
            name = self.fresh("a")
            self.top.append(f"var {name}: {self.ty(_op_type(arg))};")
            self.line(f"{name} = {self.expr(init)};")
            header_vars.append(name)
        merge_vars = self._declare_vars(merge.arguments)
        ctx = _Construct("loop", merge, merge_vars, header, header_vars)
        self.open("loop {")
        for arg, var in zip(header.arguments, header_vars, strict=False):
            self.define(arg, var, _op_type(arg))  # snapshot: back-edge assignments must not alias
        self.emit_chain(header, ctx)
        self.close()
        self._after_construct(op, merge, merge_vars)

    def emit_selection(self, op) -> None:
        region = op.regions[0]
        entry = region.blocks[0]
        merge = self._merge_block(region)
        merge_vars = self._declare_vars(merge.arguments)
        ctx = _Construct("selection", merge, merge_vars)
        self.emitted_blocks.add(entry)
        ops = list(entry.operations)
        for inner in ops[:-1]:
            self.emit_op(inner, ctx)
        self.emit_terminator(ops[-1], ctx)
        self._after_construct(op, merge, merge_vars)

    # ---- ops -----------------------------------------------------------------------------------
    def emit_op(self, op, ctx: _Construct | None, last_in_function: bool = False) -> None:
        name = op.name
        handler = _HANDLERS.get(name)
        if handler is not None:
            handler(self, op)
            return
        if name in T.INFIX or name in T.UNSIGNED_INFIX or name == "spirv.ShiftLeftLogical":
            self.emit_binary(op)
        elif name in T.FLOAT_COMPARE:
            self.emit_float_compare(op)
        elif name in T.UNARY_PREFIX:
            self.define(op.results[0], f"{T.UNARY_PREFIX[name]}({self.expr(op.operands[0])})")
        elif name in T.GL_BUILTIN:
            args = self._operand_exprs(op)
            self.define(op.results[0], f"{T.GL_BUILTIN[name]}({', '.join(args)})")
        elif name in T.GL_UNSIGNED:
            self.emit_gl_unsigned(op)
        elif name in T.GL_NAN_AWARE:
            fn = self.helpers.nan_aware(T.GL_NAN_AWARE[name], _op_type(op.results[0]))
            self.define(op.results[0], f"{fn}({', '.join(self._operand_exprs(op))})")
        elif name in T.CONVERSIONS:
            self.emit_conversion(op)
        elif name in T.ATOMIC_RMW:
            self.emit_atomic(op)
        elif name.startswith("spirv.GroupNonUniform"):
            self.emit_subgroup(op)
        elif name == "spirv.Return":
            if not last_in_function:
                self.line("return;")
        elif name in ("spirv.mlir.merge",):
            raise UnsupportedSpirvError("spirv.mlir.merge outside of its construct's merge block")
        else:
            raise UnsupportedSpirvError(
                f"SPIR-V op {name} is not supported by the WGSL translator (mlir_passes/spirv_to_wgsl)")

    def _operand_exprs(self, op) -> list[str]:
        """Operand expressions; an all-constant op gets its first operand through a `let` so that WGSL
        evaluates it at runtime (constant folding in WGSL turns overflow and NaN into compile errors)."""
        operands = list(op.operands)
        exprs = [self.expr(v) for v in operands]
        if operands and all(v in self.consts and v not in self.names for v in operands):
            name = self.fresh("k")
            self.line(f"let {name}: {self.ty(_op_type(operands[0]))} = {exprs[0]};")
            exprs[0] = name
        return exprs

    def emit_binary(self, op) -> None:
        name = op.name
        a, b = self._operand_exprs(op)
        ta = _op_type(op.operands[0])
        if name in T.SHIFTS:
            tb = _op_type(op.operands[1])
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
            rt = _op_type(op.results[0])
            if scalar_of(rt).kind == "i32":
                res = f"bitcast<{self.ty(rt)}>{res}"
            self.define(op.results[0], res)
        else:
            sym = T.INFIX.get(name) or T.UNSIGNED_INFIX[name]
            self.define(op.results[0], f"({a} {sym} {b})")

    def emit_float_compare(self, op) -> None:
        sym, kind = T.FLOAT_COMPARE[op.name]
        a, b = self._operand_exprs(op)
        t = _op_type(op.operands[0])
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
        if value not in self.consts or value in self.names:
            return False
        vals = self.consts[value]
        kind = scalar_of(_op_type(value)).kind
        mask = 0x7F800000 if kind == "f32" else 0x7C00
        return all(v & mask != mask for v in (vals if isinstance(vals, list) else [vals]))

    def emit_gl_unsigned(self, op) -> None:
        t = _op_type(op.results[0])
        args = self._operand_exprs(op)
        u = self.ty(with_scalar(_op_type(op.operands[0]), "u32"))
        inner = f"{T.GL_UNSIGNED[op.name]}({', '.join(f'bitcast<{u}>({x})' for x in args)})"
        self.define(op.results[0], f"bitcast<{self.ty(t)}>({inner})" if scalar_of(t).kind == "i32" else inner)

    def emit_conversion(self, op) -> None:
        (x,) = self._operand_exprs(op)
        src, dst = _op_type(op.operands[0]), _op_type(op.results[0])
        dname = self.ty(dst)
        if op.name in ("spirv.ConvertUToF", "spirv.UConvert") and scalar_of(src).kind == "i32":
            x = f"bitcast<{self.ty(with_scalar(src, 'u32'))}>({x})"
        if op.name == "spirv.ConvertFToU" and scalar_of(dst).kind == "i32":
            self.define(op.results[0], f"bitcast<{dname}>({self.ty(with_scalar(dst, 'u32'))}({x}))")
            return
        self.define(op.results[0], f"{dname}({x})")

    # ---- memory --------------------------------------------------------------------------------
    def _walk(self, t: SpirvType, indices) -> tuple[str, SpirvType]:
        """WGSL access path suffix and the resulting type for indices into a value of type `t`."""
        path = ""
        for idx in indices:
            if isinstance(t, Struct):
                k = idx if isinstance(idx, int) else self.consts.get(idx)
                if not isinstance(k, int):
                    raise UnsupportedSpirvError("struct member index must be a constant")
                path += f".m{k}"
                t = t.members[k]
            elif isinstance(t, (Array, Vector)):
                path += f"[{idx}]" if isinstance(idx, int) else f"[{self.expr(idx)}]"
                t = t.elem
            else:
                raise UnsupportedSpirvError(f"cannot index into {t}")
        return path, t

    def _storage_parts(self, ptr: Ptr):
        """(binding, element type, element index expr, component index expr | None) of a storage ptr."""
        root = ptr.root
        group = root.storage
        elem = group.elem_types[root.symbol]
        idx = list(ptr.indices)
        if not idx or self.consts.get(idx[0], idx[0]) != 0:
            raise UnsupportedSpirvError("storage buffer access must go through member 0 of its block")
        if len(idx) == 1:
            raise UnsupportedSpirvError("whole-buffer loads/stores are not supported")
        e = idx[1] if isinstance(idx[1], int) else self.expr(idx[1])
        comp = None
        if len(idx) == 3:
            comp = idx[2] if isinstance(idx[2], int) else self.expr(idx[2])
        elif len(idx) > 3:
            raise UnsupportedSpirvError("storage access chains deeper than element+component")
        return group, elem, e, comp

    def _word_refs(self, ptr: Ptr) -> tuple[list[str], SpirvType]:
        """References to the u32 words of a merged (aliased or atomic) binding covered by `ptr`."""
        group, elem, e, comp = self._storage_parts(ptr)
        words = size_align(elem)[0] // 4
        base = f"{e}" if words == 1 else f"({e}) * {words}"
        if comp is not None:
            if scalar_of(elem).kind == "f16":
                raise UnsupportedSpirvError("component access into f16 vectors of an aliased binding")
            return [f"{group.name}[{base} + {comp}]"], ptr.pointee
        return [f"{group.name}[{base} + {k}]" if k else f"{group.name}[{base}]" for k in range(words)], elem

    def _from_words(self, words: list[str], t: SpirvType) -> str:
        if isinstance(t, Scalar):
            return f"bitcast<{t.kind}>({words[0]})"
        assert isinstance(t, Vector)
        if t.elem.kind == "f16":
            inner = words[0] if len(words) == 1 else f"vec{len(words)}<u32>({', '.join(words)})"
            return f"bitcast<{self.ty(t)}>({inner})"
        return f"{self.ty(t)}({', '.join(f'bitcast<{t.elem.kind}>({w})' for w in words)})"

    def _to_words(self, value: str, t: SpirvType, count: int) -> list[str]:
        if isinstance(t, Scalar):
            return [f"bitcast<u32>({value})"]
        assert isinstance(t, Vector)
        if t.elem.kind == "f16":
            if count == 1:
                return [f"bitcast<u32>({value})"]
            return [f"bitcast<vec{count}<u32>>({value})[{k}]" for k in range(count)]
        return [f"bitcast<u32>({value}[{k}])" for k in range(count)]

    def ref(self, ptr: Ptr) -> str:
        """WGSL reference expression for a pointer into a non-merged variable."""
        root = ptr.root
        if isinstance(root, LocalVar) or root.kind in ("workgroup", "private"):
            path, _ = self._walk(root.pointee, ptr.indices)
            return root.name + path
        if root.kind == "storage":
            group, elem, e, comp = self._storage_parts(ptr)
            return f"{group.name}[{e}]" + ("" if comp is None else f"[{comp}]")
        raise UnsupportedSpirvError(f"reference into {root.kind} variable")

    def emit_load(self, op) -> None:
        ptr: Ptr = self.ptrs[op.operands[0]]
        root, t = ptr.root, _op_type(op.results[0])
        if isinstance(root, GlobalVar) and root.kind == "builtin":
            self.used_builtins.add(root.builtin)
            param = T.BUILTINS[root.builtin][0]
            _, full_t = self._walk(root.pointee, ())
            val = f"bitcast<{self.ty(full_t)}>({param})"
            path, _ = self._walk(root.pointee, ptr.indices)
            self.define(op.results[0], val if not path else f"{val}{path}")
        elif isinstance(root, GlobalVar) and root.kind == "push":
            self.define(op.results[0], self._push_constant(ptr, t))
        elif isinstance(root, GlobalVar) and root.kind == "storage" and root.storage.merged:
            words, wt = self._word_refs(ptr)
            if root.storage.atomic:
                words = [f"atomicLoad(&{w})" for w in words]
            self.define(op.results[0], self._from_words(words, wt))
        else:
            self.define(op.results[0], self.ref(ptr))

    def _push_constant(self, ptr: Ptr, t: SpirvType) -> str:
        idx = list(ptr.indices)
        if len(idx) != 2 or self.consts.get(idx[0], idx[0]) != 0:
            raise UnsupportedSpirvError("push constants must be loaded one 32-bit value at a time")
        k = idx[1] if isinstance(idx[1], int) else self.consts.get(idx[1])
        if self.push_constants is not None:
            if not isinstance(k, int):
                raise UnsupportedSpirvError("dynamically indexed push constant cannot be specialised")
            if k not in self.push_constants:
                raise ValueError(f"push constant {k} was not given a value to specialise with")
            bits = self.push_constants[k] % (1 << 32)
            return f"bitcast<{self.ty(t)}>({bits}u)"
        self.used_push = True
        if isinstance(k, int):
            return f"bitcast<{self.ty(t)}>(pc[{k // 4}][{k % 4}])"
        e = self.expr(idx[1])
        return f"bitcast<{self.ty(t)}>(pc[({e}) / 4][({e}) % 4])"

    def emit_store(self, op) -> None:
        ptr: Ptr = self.ptrs[op.operands[0]]
        value = self.expr(op.operands[1])
        root = ptr.root
        if isinstance(root, GlobalVar) and root.kind == "storage":
            root.storage.written = True
            if root.storage.merged:
                words, wt = self._word_refs(ptr)
                for w, v in zip(words, self._to_words(value, wt, len(words)), strict=False):
                    self.line(f"atomicStore(&{w}, {v});" if root.storage.atomic else f"{w} = {v};")
                return
        elif isinstance(root, GlobalVar) and root.kind in ("builtin", "push"):
            raise UnsupportedSpirvError(f"store to a {root.kind} variable")
        self.line(f"{self.ref(ptr)} = {value};")

    def emit_atomic(self, op) -> None:
        ptr: Ptr = self.ptrs[op.operands[0]]
        root = ptr.root
        if not (isinstance(root, GlobalVar) and root.kind == "storage"):
            raise UnsupportedSpirvError(f"{op.name} on non-storage memory is not supported")
        if not root.storage.atomic:
            raise UnsupportedSpirvError("internal: atomic binding not detected in the prepass")
        root.storage.written = True
        words, wt = self._word_refs(ptr)
        if len(words) != 1 or not isinstance(wt, Scalar):
            raise UnsupportedSpirvError(f"{op.name} on a non-scalar element")
        value = self.expr(op.operands[1])
        call = f"{T.ATOMIC_RMW[op.name]}(&{words[0]}, bitcast<u32>({value}))"
        self.define(op.results[0], f"bitcast<{wt.kind}>({call})")

    def emit_variable(self, op) -> None:
        ptr_t = _op_type(op.results[0])
        assert isinstance(ptr_t, Pointer)
        if ptr_t.storage != "Function":
            raise UnsupportedSpirvError(f"spirv.Variable in storage class {ptr_t.storage}")
        name = self.fresh("fv")
        self.top.append(f"var {name}: {self.ty(ptr_t.pointee)};")
        if len(op.operands):
            self.line(f"{name} = {self.expr(op.operands[0])};")
        var = LocalVar(name, ptr_t.pointee)
        self.ptrs[op.results[0]] = Ptr(var, (), ptr_t.pointee)

    def emit_access_chain(self, op) -> None:
        base: Ptr = self.ptrs[op.operands[0]]
        indices = tuple(list(op.operands)[1:])
        ptr_t = _op_type(op.results[0])
        assert isinstance(ptr_t, Pointer)
        self.ptrs[op.results[0]] = Ptr(base.root, base.indices + indices, ptr_t.pointee)

    def emit_addressof(self, op) -> None:
        symbol = str(op.attributes["variable"]).lstrip("@").strip('"')
        var = self.globals[symbol]
        self.ptrs[op.results[0]] = Ptr(var, (), var.pointee)

    def emit_constant(self, op) -> None:
        attr = op.attributes["value"]
        t = _op_type(op.results[0])
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

    def emit_select(self, op) -> None:
        c, a, b = self._operand_exprs(op)
        self.define(op.results[0], f"select({b}, {a}, {c})")

    def emit_bitcast(self, op) -> None:
        (x,) = self._operand_exprs(op)
        src, dst = _op_type(op.operands[0]), _op_type(op.results[0])
        if src == dst:
            self.define(op.results[0], x)
        else:
            self.define(op.results[0], f"bitcast<{self.ty(dst)}>({x})")

    def emit_composite_extract(self, op) -> None:
        (x,) = [self.expr(op.operands[0])]
        path, _ = self._walk(_op_type(op.operands[0]), _ints(op.attributes["indices"]))
        self.define(op.results[0], f"{x}{path}")

    def emit_composite_construct(self, op) -> None:
        args = self._operand_exprs(op)
        self.define(op.results[0], f"{self.ty(_op_type(op.results[0]))}({', '.join(args)})")

    def emit_composite_insert(self, op) -> None:
        val, obj = self.expr(op.operands[0]), self.expr(op.operands[1])  # (object, composite)
        t = _op_type(op.results[0])
        tmp = self.fresh("t")
        self.top.append(f"var {tmp}: {self.ty(t)};")
        self.line(f"{tmp} = {obj};")
        path, _ = self._walk(t, _ints(op.attributes["indices"]))
        self.line(f"{tmp}{path} = {val};")
        self.define(op.results[0], tmp)

    def emit_vector_shuffle(self, op) -> None:
        a, b = self.expr(op.operands[0]), self.expr(op.operands[1])
        n = _op_type(op.operands[0]).count
        comps = []
        for k in _ints(op.attributes["components"]):
            k = 0 if k < 0 or k == 0xFFFFFFFF else k  # undefined component
            comps.append(f"{a}[{k}]" if k < n else f"{b}[{k - n}]")
        self.define(op.results[0], f"{self.ty(_op_type(op.results[0]))}({', '.join(comps)})")

    def emit_vector_extract_dynamic(self, op) -> None:
        v, i = self.expr(op.operands[0]), self.expr(op.operands[1])
        self.define(op.results[0], f"{v}[{i}]")

    def emit_vector_insert_dynamic(self, op) -> None:
        v, x, i = (self.expr(o) for o in op.operands)
        t = _op_type(op.results[0])
        tmp = self.fresh("t")
        self.top.append(f"var {tmp}: {self.ty(t)};")
        self.line(f"{tmp} = {v};")
        self.line(f"{tmp}[{i}] = {x};")
        self.define(op.results[0], tmp)

    def emit_is_nan_inf(self, op) -> None:
        t = _op_type(op.operands[0])
        fn = self.helpers.isnan(t) if op.name == "spirv.IsNan" else self.helpers.isinf(t)
        self.define(op.results[0], f"{fn}({self.expr(op.operands[0])})")

    def emit_ordered(self, op) -> None:
        a, b = self._operand_exprs(op)
        either = self._either_nan(op, a, b, _op_type(op.operands[0]))
        self.define(op.results[0], f"!({either})" if op.name == "spirv.Ordered" else either)

    def emit_undef(self, op) -> None:
        self.define(op.results[0], f"{self.ty(_op_type(op.results[0]))}()")

    def emit_smod(self, op) -> None:
        a, b = self._operand_exprs(op)
        if op.name == "spirv.FMod":  # sign of the divisor
            self.define(op.results[0], f"({a} - {b} * floor({a} / {b}))")
            return
        r = self.define_tmp(f"({a} % {b})", _op_type(op.results[0]))
        zero = f"{self.ty(_op_type(op.results[0]))}()"
        fix = f"(({r} != {zero}) & (({r} < {zero}) != ({b} < {zero})))"
        self.define(op.results[0], f"select({r}, {r} + {b}, {fix})")

    def define_tmp(self, expr: str, t: SpirvType) -> str:
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
        result_t = _op_type(op.results[0]) if len(op.results) else None
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
        semantics = str(op.attributes["memory_semantics"]) if "memory_semantics" in op.attributes else ""
        if "UniformMemory" in semantics:
            self.line("storageBarrier();")
        if "WorkgroupMemory" in semantics or "UniformMemory" not in semantics:
            self.line("workgroupBarrier();")

    def emit_nested(self, op) -> None:
        if op.name == "spirv.mlir.loop":
            self.emit_loop(op)
        else:
            self.emit_selection(op)


_HANDLERS = {
    "spirv.Constant": FunctionEmitter.emit_constant,
    "spirv.mlir.addressof": FunctionEmitter.emit_addressof,
    "spirv.AccessChain": FunctionEmitter.emit_access_chain,
    "spirv.InBoundsPtrAccessChain": FunctionEmitter.emit_access_chain,
    "spirv.InBoundsAccessChain": FunctionEmitter.emit_access_chain,
    "spirv.Load": FunctionEmitter.emit_load,
    "spirv.Store": FunctionEmitter.emit_store,
    "spirv.Variable": FunctionEmitter.emit_variable,
    "spirv.Select": FunctionEmitter.emit_select,
    "spirv.Bitcast": FunctionEmitter.emit_bitcast,
    "spirv.CompositeExtract": FunctionEmitter.emit_composite_extract,
    "spirv.CompositeConstruct": FunctionEmitter.emit_composite_construct,
    "spirv.CompositeInsert": FunctionEmitter.emit_composite_insert,
    "spirv.VectorShuffle": FunctionEmitter.emit_vector_shuffle,
    "spirv.VectorExtractDynamic": FunctionEmitter.emit_vector_extract_dynamic,
    "spirv.VectorInsertDynamic": FunctionEmitter.emit_vector_insert_dynamic,
    "spirv.IsNan": FunctionEmitter.emit_is_nan_inf,
    "spirv.IsInf": FunctionEmitter.emit_is_nan_inf,
    "spirv.Ordered": FunctionEmitter.emit_ordered,
    "spirv.Unordered": FunctionEmitter.emit_ordered,
    "spirv.Undef": FunctionEmitter.emit_undef,
    "spirv.SMod": FunctionEmitter.emit_smod,
    "spirv.FMod": FunctionEmitter.emit_smod,
    "spirv.ControlBarrier": FunctionEmitter.emit_barrier,
    "spirv.MemoryBarrier": FunctionEmitter.emit_barrier,
    "spirv.mlir.loop": FunctionEmitter.emit_nested,
    "spirv.mlir.selection": FunctionEmitter.emit_nested,
}
