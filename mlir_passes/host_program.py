"""Extracts IREE's HAL host program (`--compile-to=hal`, flat `main$async`) into a list of commands.

The host program of a static-shape graph is straight-line code: buffer allocations, command buffers of
dispatches with constant workgroup counts and push constants, barriers, fills, copies, and buffer views
returned as outputs. Initializers that compute hoisted constants (IREE's const-eval) are extracted the
same way and run once when a plan is loaded. Inlined constant tensors (`util.buffer.constant`, imported
into a device buffer) become `upload` commands carrying their bytes; branches on values known while
extracting (did the import succeed) are followed. Anything else raises `UnsupportedHostOp` naming the op.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from torch_webgpu.plan import host_expr

_BOOLS = {"true": 1, "false": 0}
# arith.cmpi's predicate attribute (an i64 enum) in MLIR's order.
_CMPI_PREDICATES = ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")
_EXPR_HEADS = frozenset({"dim", "select", *host_expr.BINARY, *host_expr.UNARY,
                         *(f"cmp.{p}" for p in host_expr.COMPARE)})
_MAX_BLOCKS = 10000   # blocks one host function may run through (IREE's host programs have no loops here)
# Ops that only set up devices, fences, executables or check invariants: nothing to do on WebGPU.
_IGNORED = frozenset({
    "hal.buffer_view.assert", "hal.buffer.assert", "hal.device.allocator", "hal.fence.create",
    "hal.fence.join", "hal.fence.await", "hal.command_buffer.create", "hal.command_buffer.finalize",
    "hal.device.queue.execute", "hal.buffer_usage", "hal.memory_type", "hal.encoding_type",
    "util.status.check_ok", "util.null", "hal.device.queue.flush",
    "hal.device.queue.barrier",   # orders queue work by fences; WebGPU runs a queue in order
})


class UnsupportedHostOp(NotImplementedError):
    """The host program uses an op the WebGPU plan cannot express yet."""


@dataclass(frozen=True)
class BufferRef:
    """A buffer of the host program: `input` (argument index), `transient` or `global` (by id)."""

    kind: str
    index: int


@dataclass
class Binding:
    """A dispatch binding: a byte range of a buffer."""

    buffer: BufferRef
    offset: int
    length: int


@dataclass
class Command:
    """One host command: alloca/dealloca/dispatch/barrier/fill/copy/upload."""

    kind: str
    buffer: BufferRef | None = None          # alloca, dealloca, fill target
    size: int = 0                            # alloca size, fill/copy length
    offset: int = 0                          # fill offset, copy target offset
    pattern: int = 0                         # fill pattern (already widened to 32 bits)
    source: BufferRef | None = None          # copy source
    source_offset: int = 0
    entry_point: str = ""                    # dispatch
    executable: str = ""
    workgroups: tuple[int, int, int] = (1, 1, 1)
    constants: list[int] = field(default_factory=list)
    bindings: list[Binding] = field(default_factory=list)
    constant: str = ""                       # upload: name in HostProgram.constants


@dataclass
class OutputView:
    """A returned tensor: a byte range of a buffer, or an input returned as is (`input_index`)."""

    buffer: BufferRef | None
    offset: int
    length: int
    shape: tuple[int, ...]
    element_type: str
    input_index: int | None = None


@dataclass
class HostProgram:
    """The extracted program: buffers, one-time initializer commands, per-call commands and outputs."""

    globals: dict[int, int] = field(default_factory=dict)       # global buffer id -> size
    transients: dict[int, int] = field(default_factory=dict)    # transient buffer id -> size
    initializer: list[Command] = field(default_factory=list)
    main: list[Command] = field(default_factory=list)
    outputs: list[OutputView] = field(default_factory=list)
    num_inputs: int = 0
    constants: dict[str, bytes] = field(default_factory=dict)   # inlined constant name -> bytes


def constant_bytes(attr_text: str) -> bytes:
    """The bytes of a `util.buffer.constant` value: a `#util.composite<Nxi8, [...]>` of dense elements
    (IREE packs several constants with alignment padding) or one dense elements attribute."""
    from iree.compiler import ir

    text = attr_text.strip()
    match = re.fullmatch(r"#util\.composite<(\d+)xi8,\s*\[(.*)\]>", text, re.S)
    parts = _split_top_level(match.group(2)) if match else [text]
    with ir.Context():
        data = b"".join(_dense_bytes(ir, part) for part in parts)
    if match and len(data) != int(match.group(1)):
        raise UnsupportedHostOp(f"inlined composite constant holds {len(data)} bytes, "
                                f"declares {match.group(1)}")
    return data


def _dense_bytes(ir: Any, part: str) -> bytes:
    """The bytes of one dense elements attribute, in its element type."""
    if part.startswith("dense_resource<"):
        raise UnsupportedHostOp("an inlined constant stored as a dense_resource blob (elided by IREE's "
                                "printer); pass the tensor as a graph input")
    try:
        attr = ir.DenseElementsAttr(ir.Attribute.parse(part))
    except (ValueError, TypeError) as exc:
        raise UnsupportedHostOp(f"inlined constant element `{part[:80]}` is not a dense tensor") from exc
    bits = _element_bits(str(attr.type))
    if bits % 8:
        raise UnsupportedHostOp(f"inlined constant of {attr.type}: sub-byte elements are not supported")
    return np.ascontiguousarray(np.array(attr)).tobytes()


def _element_bits(type_text: str) -> int:
    element = type_text.rsplit("x", 1)[-1].rstrip(">")
    digits = re.sub(r"\D", "", element)
    return int(digits) if digits else 32


def _split_top_level(text: str) -> list[str]:
    """Split a comma-separated attribute list at depth zero (dense<[...]> nests brackets and quotes)."""
    parts, depth, start, quoted = [], 0, 0, False
    for i, ch in enumerate(text):
        if ch == '"':
            quoted = not quoted
        elif quoted:
            continue
        elif ch in "<[(":
            depth += 1
        elif ch in ">])":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def _is_integer(mlir_type: Any) -> bool:
    text = str(mlir_type)
    return text == "index" or re.fullmatch(r"i\d+", text) is not None


def _add(a: Any, b: Any) -> Any:
    return host_expr.fold("addi", a, b)


class _Extractor:
    def __init__(self) -> None:
        self.program = HostProgram()
        self.global_buffers: dict[str, BufferRef] = {}
        self.next_id = 0

    # -- values --
    def _int(self, env: dict, value: Any) -> Any:
        """An index value: an int, or an expression of the inputs' dimensions (host_expr)."""
        v = env.get(value)
        if not (isinstance(v, int) or (isinstance(v, list) and v and v[0] in _EXPR_HEADS)):
            raise UnsupportedHostOp(f"host value {value.get_name()} is neither an integer nor an expression "
                                    "of the inputs' dimensions")
        return v

    def _static_int(self, env: dict, value: Any, what: str) -> int:
        v = self._int(env, value)
        if not isinstance(v, int):
            raise UnsupportedHostOp(f"{what} depends on the inputs' dimensions (not supported with dynamic "
                                    "shapes; compile with dynamic=False)")
        return v

    def _buffer(self, env: dict, value: Any) -> tuple[BufferRef, int]:
        v = env.get(value)
        if not (isinstance(v, tuple) and isinstance(v[0], BufferRef)):
            raise UnsupportedHostOp(f"host value {value.get_name()} is not a buffer we can track")
        return v

    def _new_buffer(self, kind: str, size: int) -> BufferRef:
        ref = BufferRef(kind, self.next_id)
        self.next_id += 1
        (self.program.globals if kind == "global" else self.program.transients)[ref.index] = size
        return ref

    # -- functions --
    def run_function(self, region: Any, commands: list[Command], in_initializer: bool) -> list | None:
        """Interpret `region` from its entry block, following branches whose condition is known."""
        env: dict[Any, Any] = {}
        block = region.blocks[0]
        for i, arg in enumerate(block.arguments):
            # An integer argument is a host scalar (a symbolic int): "dimension 0" of input i.
            env[arg] = host_expr.dim(i, 0) if _is_integer(arg.type) else ("arg", i)
        for _ in range(_MAX_BLOCKS):
            jump = None
            for op in block.operations:
                name = op.operation.name
                if name in ("cf.br", "cf.cond_br"):
                    jump = self._branch(op, env)
                    break
                result = self._op(op, env, commands, in_initializer)
                if result is not None:
                    return result
            if jump is None:
                return None
            block, args = jump
            for formal, actual in zip(block.arguments, args, strict=True):
                env[formal] = env.get(actual)
        raise UnsupportedHostOp(f"host program runs more than {_MAX_BLOCKS} blocks (a loop)")

    def _branch(self, op: Any, env: dict) -> tuple[Any, list]:
        """The successor block of `cf.br`/`cf.cond_br` and the values passed to it."""
        successors = list(op.operation.successors)
        operands = list(op.operands)
        if op.operation.name == "cf.br":
            return successors[0], operands
        cond = env.get(operands[0])
        if not isinstance(cond, int):
            raise UnsupportedHostOp("host control flow on the inputs' dimensions (a dynamic-shape pattern "
                                    "the WebGPU plan cannot express; compile with dynamic=False)")
        seg = [int(x) for x in str(op.operation.attributes["operandSegmentSizes"])
               .split(":")[1].rstrip(">").split(",")]
        true_args = operands[seg[0]:seg[0] + seg[1]]
        false_args = operands[seg[0] + seg[1]:]
        return (successors[0], true_args) if cond else (successors[1], false_args)

    def _op(self, op: Any, env: dict, commands: list[Command], in_initializer: bool) -> list | None:
        name = op.operation.name
        attrs = op.operation.attributes
        if name in _IGNORED:
            return None
        if name == "arith.constant":
            text = str(attrs["value"]).split(":")[0].strip()
            try:
                env[op.result] = _BOOLS[text] if text in _BOOLS else int(text)
            except ValueError:
                env[op.result] = text
        elif name == "util.buffer.constant":
            key = f"_host_const_{len(self.program.constants)}"
            self.program.constants[key] = constant_bytes(str(attrs["value"]))
            env[op.result] = ("constant", key)
        elif name == "hal.allocator.import":
            # operands: allocator, affinity, memory type, usage, source, offset, length
            source = env.get(op.operands[4])
            if not (isinstance(source, tuple) and source[0] == "constant"):
                raise UnsupportedHostOp("hal.allocator.import of something other than an inlined constant")
            offset, length = self._int(env, op.operands[5]), self._int(env, op.operands[6])
            data = self.program.constants[source[1]]
            if offset or length != len(data):
                key = f"{source[1]}_{offset}_{length}"
                self.program.constants[key] = data[offset:offset + length]
                source = ("constant", key)
            ref = self._new_buffer("transient", length)
            commands.append(Command("alloca", buffer=ref, size=length))
            commands.append(Command("upload", buffer=ref, size=length, constant=source[1]))
            env[op.results[0]] = 1           # "imported": the branch that reads a file is never taken
            env[op.results[1]] = (ref, 0)
        elif name == "hal.buffer_view.dim":
            src = env.get(op.operands[0])
            if not (isinstance(src, tuple) and src[0] == "arg"):
                raise UnsupportedHostOp("hal.buffer_view.dim of something other than an argument")
            env[op.result] = host_expr.dim(src[1], int(str(attrs["index"]).split(":")[0]))
        elif name == "util.align":
            env[op.result] = host_expr.fold("align", self._int(env, op.operands[0]),
                                            self._int(env, op.operands[1]))
        elif name == "arith.cmpi":
            predicate = _CMPI_PREDICATES[int(str(attrs["predicate"]).split(":")[0])]
            env[op.result] = host_expr.fold(f"cmp.{predicate}", self._int(env, op.operands[0]),
                                            self._int(env, op.operands[1]))
        elif name.startswith("arith.") and host_expr.supported(name[6:]) and _is_integer(op.result.type):
            env[op.result] = host_expr.fold(name[6:], *(self._int(env, v) for v in op.operands))
        elif name == "hal.element_type":
            env[op.result] = str(attrs["type"])
        elif name == "util.global.load":
            sym = str(attrs["global"]).lstrip("@")
            if str(op.result.type) == "!hal.buffer":
                if sym not in self.global_buffers:
                    raise UnsupportedHostOp(f"global buffer @{sym} is read before it is initialized")
                env[op.result] = (self.global_buffers[sym], 0)
            else:
                env[op.result] = ("global", sym)
        elif name == "util.global.store":
            if str(op.operands[0].type) == "!hal.buffer":
                ref, base = self._buffer(env, op.operands[0])
                if base:
                    raise UnsupportedHostOp("a global buffer stored at an offset")
                if ref.kind == "transient":
                    # The buffer outlives the initializer: it becomes a plan-global buffer.
                    size = self.program.transients.pop(ref.index)
                    self.program.globals[ref.index] = size
                    ref = BufferRef("global", ref.index)
                    self._rebind(ref)
                self.global_buffers[str(attrs["global"]).lstrip("@")] = ref
        elif name == "hal.buffer_view.buffer":
            src = env.get(op.operands[0])
            if not (isinstance(src, tuple) and src[0] == "arg"):
                raise UnsupportedHostOp("hal.buffer_view.buffer of something other than an argument")
            env[op.result] = (BufferRef("input", src[1]), 0)
            self.program.num_inputs = max(self.program.num_inputs, src[1] + 1)
        elif name == "hal.device.queue.alloca":
            size = self._int(env, op.operands[-1])
            ref = self._new_buffer("transient", size)
            env[op.result] = (ref, 0)
            commands.append(Command("alloca", buffer=ref, size=size))
        elif name == "hal.device.queue.dealloca":
            ref, _ = self._buffer(env, op.operands[-1])
            commands.append(Command("dealloca", buffer=ref))
        elif name == "hal.buffer.subspan":
            ref, base = self._buffer(env, op.operands[0])
            env[op.result] = (ref, _add(base, self._int(env, op.operands[1])))
        elif name == "hal.executable.lookup.function":
            ref = str(attrs["entry_point"])
            parts = [p.lstrip("@") for p in ref.split("::")]
            env[op.result] = ("function", parts[0], parts[-1])
        elif name == "hal.command_buffer.dispatch":
            commands.append(self._dispatch(op, env))
        elif name == "hal.command_buffer.execution_barrier":
            commands.append(Command("barrier"))
        elif name == "hal.command_buffer.fill_buffer":
            ref, base = self._buffer(env, op.operands[1])
            width = int(str(op.operands[4].type).lstrip("i")) // 8
            pattern = self._static_int(env, op.operands[4], "a fill pattern") & ((1 << (8 * width)) - 1)
            pattern32 = int.from_bytes(pattern.to_bytes(width, "little") * (4 // width), "little")
            commands.append(Command("fill", buffer=ref, offset=_add(base, self._int(env, op.operands[2])),
                                    size=self._int(env, op.operands[3]), pattern=pattern32))
        elif name == "hal.device.queue.fill":
            # Outside a command buffer; operands end with target, offset, length, pattern.
            *_, target, offset, length, pattern_value = list(op.operands)
            ref, base = self._buffer(env, target)
            width = int(str(pattern_value.type).lstrip("i")) // 8
            pattern = self._static_int(env, pattern_value, "a fill pattern") & ((1 << (8 * width)) - 1)
            pattern32 = int.from_bytes(pattern.to_bytes(width, "little") * (4 // width), "little")
            commands.append(Command("fill", buffer=ref, offset=_add(base, self._int(env, offset)),
                                    size=self._int(env, length), pattern=pattern32))
        elif name == "hal.device.queue.copy":
            # Operands end with source, source offset, target, target offset, length.
            *_, source, source_offset, target, target_offset, length = list(op.operands)
            src, sbase = self._buffer(env, source)
            dst, dbase = self._buffer(env, target)
            commands.append(Command("copy", source=src,
                                    source_offset=_add(sbase, self._int(env, source_offset)),
                                    buffer=dst, offset=_add(dbase, self._int(env, target_offset)),
                                    size=self._int(env, length)))
        elif name == "hal.command_buffer.copy_buffer":
            src, sbase = self._buffer(env, op.operands[1])
            dst, dbase = self._buffer(env, op.operands[3])
            commands.append(Command("copy", source=src,
                                    source_offset=_add(sbase, self._int(env, op.operands[2])),
                                    buffer=dst, offset=_add(dbase, self._int(env, op.operands[4])),
                                    size=self._int(env, op.operands[5])))
        elif name == "hal.buffer_view.create":
            ref, base = self._buffer(env, op.operands[0])
            shape = tuple(self._int(env, v) for v in list(op.operands)[5:])
            env[op.result] = OutputView(ref, _add(base, self._int(env, op.operands[1])),
                                        self._int(env, op.operands[2]), shape, env.get(op.operands[3], "?"))
        elif name == "util.return":
            if in_initializer:
                return []
            return [self._output(env, v) for v in op.operands]
        elif name.startswith("arith."):
            raise UnsupportedHostOp(f"host arithmetic `{name}` is not supported by the WebGPU plan extractor")
        else:
            raise UnsupportedHostOp(f"IREE host op `{name}` is not supported by the WebGPU plan extractor")
        return None

    def _rebind(self, ref: BufferRef) -> None:
        """Renames transient commands that referred to a buffer that became global."""
        old = BufferRef("transient", ref.index)
        for cmd in self.program.initializer:
            if cmd.buffer == old:
                cmd.buffer = ref
            if cmd.source == old:
                cmd.source = ref
            for b in cmd.bindings:
                if b.buffer == old:
                    b.buffer = ref

    def _dispatch(self, op: Any, env: dict) -> Command:
        seg = [int(x) for x in str(op.operation.attributes["operandSegmentSizes"])
               .split(":")[1].rstrip(">").split(",")]
        operands = list(op.operands)
        groups, pos = [], 0
        for n in seg:
            groups.append(operands[pos:pos + n])
            pos += n
        _, _, entry, wx, wy, wz, consts, buffers, offsets, lengths = groups
        fn = env.get(entry[0])
        if not (isinstance(fn, tuple) and fn[0] == "function"):
            raise UnsupportedHostOp("dispatch of an entry point that is not a constant lookup")
        bindings = []
        for b, o, n in zip(buffers, offsets, lengths, strict=False):
            ref, base = self._buffer(env, b)
            bindings.append(Binding(ref, _add(base, self._int(env, o)), self._int(env, n)))
        return Command("dispatch", executable=fn[1], entry_point=fn[2],
                       workgroups=(self._int(env, wx[0]), self._int(env, wy[0]), self._int(env, wz[0])),
                       constants=[host_expr.fold("trunci", self._int(env, c)) for c in consts],
                       bindings=bindings)

    def _output(self, env: dict, value: Any) -> OutputView:
        v = env.get(value)
        if isinstance(v, OutputView):
            return v
        if isinstance(v, tuple) and v[0] == "arg":
            return OutputView(None, 0, 0, (), "?", input_index=v[1])
        raise UnsupportedHostOp(f"returned value {value.get_name()} is not a buffer view")


def _is_setup_initializer(op: Any) -> bool:
    """Device selection, queries and executable creation: no buffers, nothing to run."""
    for block in op.regions[0].blocks:
        for inner in block.operations:
            n = inner.operation.name
            if n in ("util.global.store",) and str(inner.operands[0].type) == "!hal.buffer":
                return False
            if n.startswith("hal.command_buffer") or n == "util.buffer.constant":
                return False
    return True


def extract_host_program(hal_text: str, function: str = "main$async") -> HostProgram:
    """Parse IREE's HAL-phase module text and extract its initializers and `function` as commands."""
    from iree.compiler import ir

    with ir.Context() as ctx:
        ctx.allow_unregistered_dialects = True
        module = ir.Module.parse(hal_text)
        ex = _Extractor()
        main = None
        for op in module.body.operations:
            name = op.operation.name
            if name == "util.initializer":
                if _is_setup_initializer(op):
                    continue
                ex.run_function(op.regions[0], ex.program.initializer, in_initializer=True)
            elif name == "util.func" and str(op.attributes["sym_name"]).strip('"') == function:
                main = op
        if main is None:
            raise UnsupportedHostOp(f"no function @{function} in the HAL module")
        outputs = ex.run_function(main.regions[0], ex.program.main, in_initializer=False)
        ex.program.outputs = outputs or []
        ex.program.num_inputs = len(main.regions[0].blocks[0].arguments) - 2  # minus the two fences
        return ex.program


def extract_host_programs(hal_text: str, functions: list[str]) -> list[HostProgram]:
    """The programs of several functions of one HAL module (one IREE compile of many graphs). Buffer ids
    are unique across them; the first program carries the initializers, and all share the global
    buffers and the inlined constants."""
    from iree.compiler import ir

    with ir.Context() as ctx:
        ctx.allow_unregistered_dialects = True
        module = ir.Module.parse(hal_text)
        ex = _Extractor()
        found = {}
        for op in module.body.operations:
            name = op.operation.name
            if name == "util.initializer":
                if not _is_setup_initializer(op):
                    ex.run_function(op.regions[0], ex.program.initializer, in_initializer=True)
            elif name == "util.func":
                found[str(op.attributes["sym_name"]).strip('"')] = op
        shared = ex.program
        programs = []
        for function in functions:
            if function not in found:
                raise UnsupportedHostOp(f"no function @{function} in the HAL module")
            program = HostProgram(globals=shared.globals, constants=shared.constants)
            if not programs:
                program.initializer = shared.initializer
            ex.program = program
            region = found[function].regions[0]
            program.outputs = ex.run_function(region, program.main, in_initializer=False) or []
            program.num_inputs = len(region.blocks[0].arguments) - 2  # minus the two fences
            programs.append(program)
        if programs:
            programs[0].transients.update(shared.transients)   # buffers the initializers allocated
        return programs
