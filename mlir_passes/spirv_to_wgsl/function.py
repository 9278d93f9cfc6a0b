"""Translation of one spirv.func body into WGSL statements: SSA values, structured control flow, and the
op dispatch table (ops themselves live in the constants, memory and values mixins)."""

from __future__ import annotations

from dataclasses import dataclass, field

from . import op_tables as T
from .constants import ConstantOps
from .errors import UnsupportedSpirvError
from .memory import MemoryOps
from .resources import GlobalVar
from .types import SpirvType, attr_ints, value_type
from .values import ValueOps
from .wgsl_types import Helpers, TypeNamer


@dataclass
class _Construct:
    """The structured construct (loop or selection) whose blocks are being emitted."""

    kind: str  # 'loop' | 'selection'
    merge: object  # the merge Block
    merge_vars: list[str]
    header: object = None  # loop header Block
    header_vars: list[str] = field(default_factory=list)






class FunctionEmitter(ConstantOps, MemoryOps, ValueOps):
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
        """Append one statement at the current indentation."""
        self.lines.append("  " * self.indent + text)

    def open(self, text: str) -> None:
        """Append one statement at the current indentation."""
        self.line(text)
        self.indent += 1
        self.scope_counter += 1
        self.scope = self.scope + (self.scope_counter,)

    def close(self, text: str = "}") -> None:
        """Append a line that opens a `{` scope."""
        self.indent -= 1
        self.scope = self.scope[:-1]
        self.line(text)

    def fresh(self, prefix: str = "v") -> str:
        """Close the innermost scope."""
        self.counter += 1
        return f"{prefix}{self.counter}"

    def ty(self, t: SpirvType) -> str:
        """A new unique WGSL name."""
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
        t = t or value_type(value)
        name = self.fresh()
        if value in self.hoisted:
            self.top.append(f"var {name}: {self.ty(t)};")
            self.line(f"{name} = {expr};")
        else:
            self.line(f"let {name}: {self.ty(t)} = {expr};")
        self.names[value] = name
        self.def_scope[value] = self.scope
        return name

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
        sizes = attr_ints(term.attributes["operandSegmentSizes"])
        operands = list(term.operands)
        t_args = operands[sizes[0]:sizes[0] + sizes[1]]
        f_args = operands[sizes[0] + sizes[1]:]
        return t_args, f_args

    def emit_terminator(self, term, ctx: _Construct) -> None:
        """The WGSL spelling of a type."""
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
        """Emit a block terminator: branches become assignments plus break/continue."""
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
                self.define(arg, e, value_type(arg))
            self.emit_chain(target, ctx)

    def _merge_block(self, region):
        for block in region.blocks:
            ops = list(block.operations)
            if ops and ops[-1].name == "spirv.mlir.merge":
                return block
        raise UnsupportedSpirvError("structured construct without a spirv.mlir.merge block")

    def _declare_vars(self, values) -> list[str]:
        """Branch to the merge block, back to the loop header, or into a following block."""
        names = []
        for v in values:
            name = self.fresh("m")
            self.top.append(f"var {name}: {self.ty(value_type(v))};")
            names.append(name)
        return names

    def _after_construct(self, op, merge, merge_vars: list[str]) -> None:
        """Bind merge-block arguments, emit the merge block's ops, bind the construct's results."""
        for arg, var in zip(merge.arguments, merge_vars, strict=False):
            self.define(arg, var, value_type(arg))
        ops = list(merge.operations)
        for inner in ops[:-1]:
            self.emit_op(inner, None)
        for result, operand in zip(op.results, ops[-1].operands, strict=False):
            self.define(result, self.expr(operand), value_type(result))

    def emit_loop(self, op) -> None:
        """spirv.mlir.loop → `loop {}` with vars for header and merge block arguments."""
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
            self.top.append(f"var {name}: {self.ty(value_type(arg))};")
            self.line(f"{name} = {self.expr(init)};")
            header_vars.append(name)
        merge_vars = self._declare_vars(merge.arguments)
        ctx = _Construct("loop", merge, merge_vars, header, header_vars)
        self.open("loop {")
        for arg, var in zip(header.arguments, header_vars, strict=False):
            self.define(arg, var, value_type(arg))  # snapshot: back-edge assignments must not alias
        self.emit_chain(header, ctx)
        self.close()
        self._after_construct(op, merge, merge_vars)

    def emit_selection(self, op) -> None:
        """spirv.mlir.loop → `loop {}` with vars for header and merge block arguments."""
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
        """spirv.mlir.selection → `if`/`else`."""
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
            fn = self.helpers.nan_aware(T.GL_NAN_AWARE[name], value_type(op.results[0]))
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
            self.line(f"let {name}: {self.ty(value_type(operands[0]))} = {exprs[0]};")
            exprs[0] = name
        return exprs

    def emit_nested(self, op) -> None:
        """Emit one op through the handler table or the declarative op tables."""
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
