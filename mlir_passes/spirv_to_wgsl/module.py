"""translate_spirv_module: each entry point of an IREE spirv.module → one WGSL compute shader."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from torch_webgpu.plan.grid import WORKGROUP_FOLD_OVERRIDE

from .errors import UnsupportedSpirvError
from .function import FunctionEmitter
from .op_tables import ATOMIC_RMW, BUILTINS
from .resources import Binding, GlobalVar, collect_globals, push_constant_count
from .types import Scalar
from .wgsl_types import Helpers, TypeNamer

_ATOMIC_OPS = set(ATOMIC_RMW) | {"spirv.AtomicLoad", "spirv.AtomicStore", "spirv.AtomicCompareExchange",
                                 "spirv.AtomicSMax", "spirv.AtomicSMin", "spirv.AtomicIIncrement",
                                 "spirv.AtomicIDecrement"}


@dataclass
class WGSLExecutable:
    """One WGSL compute shader translated from one SPIR-V entry point.

    Bindings are dense @group(0) @binding(0..n-1) in the order of `bindings` (IREE's (set, binding)
    sorted); the push-constant uniform, when there is one, follows at `push_constant_binding` and holds
    the IREE push constants as array<vec4<u32>, ceil(n/4)> (constant k at [k/4][k%4])."""

    name: str  # SPIR-V entry point name (IREE's export name)
    entry_point: str  # WGSL function name
    code: str
    workgroup_size: tuple[int, int, int]
    bindings: list[Binding]
    push_constant_count: int = 0
    push_constant_binding: int | None = None
    atomics: set[int] = field(default_factory=set)  # wgsl_binding of bindings declared array<atomic<u32>>
    features: frozenset[str] = frozenset()  # device features it needs: 'shader-f16', 'subgroups'

    @property
    def binding_count(self) -> int:
        """Number of @group(0) bindings the runtime must bind (storage + push-constant uniform)."""
        return len(self.bindings) + (self.push_constant_binding is not None)


def _foldable_workgroup_ids(used: set[str]) -> tuple[list[str], list[str]]:
    """Entry parameters and body prologue that define `workgroup_id` (and `num_workgroups`) logically,
    so the grid may be folded (torch_webgpu/plan/grid.py)."""
    raw = ["@builtin(workgroup_id) wg_id_raw: vec3<u32>", "@builtin(num_workgroups) wg_count_raw: vec3<u32>"]
    params = raw + [f"@builtin({BUILTINS[b][0]}) {BUILTINS[b][0]}: {BUILTINS[b][1]}"
                    for b in sorted(used - {"WorkgroupId", "NumWorkgroups"})]
    fold = WORKGROUP_FOLD_OVERRIDE
    # `let`s and `select` on the override: with the override at 0 (no fold) the pipeline's constant
    # folding leaves exactly the original builtins, so unfolded dispatches run the code IREE planned.
    prologue = [
        "  let folded = wg_id_raw.x + wg_id_raw.y * wg_count_raw.x;",
        f"  if ({fold} != 0u && folded >= {fold}) {{ return; }}",
        f"  let workgroup_id = select(wg_id_raw, vec3<u32>(folded, 0u, wg_id_raw.z), {fold} != 0u);",
        f"  let num_workgroups = select(wg_count_raw, vec3<u32>({fold}, 1u, wg_count_raw.z), {fold} != 0u);",
    ]
    return params, prologue


def _wgsl_ident(name: str) -> str:
    ident = re.sub(r"[^A-Za-z0-9_]", "_", name)
    ident = re.sub(r"__+", "_", ident).strip("_") or "main"
    return ident if not ident[0].isdigit() else f"k_{ident}"


def _half_word_store(var: GlobalVar | None) -> bool:
    """A store through `var` writes half a u32 word: an f16 scalar element of a merged binding."""
    if var is None or var.storage is None:
        return False
    elem = var.storage.elem_types.get(var.symbol)
    return (isinstance(elem, Scalar) and elem.kind == "f16"
            and len(set(var.storage.elem_types.values())) > 1)


def _root_symbol(value) -> str | None:
    """The global variable symbol a pointer value is derived from (through access chains)."""
    while True:
        owner = value.owner
        name = getattr(owner, "name", None)
        if name == "spirv.mlir.addressof":
            return str(owner.attributes["variable"]).lstrip("@").strip('"')
        if name in ("spirv.AccessChain", "spirv.InBoundsAccessChain", "spirv.InBoundsPtrAccessChain"):
            value = owner.operands[0]
            continue
        return None


def _walk_ops(op):
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                yield inner
                yield from _walk_ops(inner)


def _spirv_modules(module):
    for op in module.body.operations:
        if op.name == "spirv.module":
            yield op
        else:
            yield from (o for o in _walk_ops(op) if o.name == "spirv.module")


def _parse(text: str):
    from iree.compiler import ir  # the MLIR bindings IREE ships register the spirv dialect
    from iree.compiler._mlir_libs import _mlir

    prefix = f"{__package__}._dialects"
    if prefix not in _mlir.globals.dialect_search_modules:
        _mlir.globals.append_dialect_search_prefix(prefix)
    ctx = ir.Context()
    try:
        return ctx, ir.Module.parse(text, ctx)
    except Exception as exc:
        raise UnsupportedSpirvError(f"cannot parse the spirv-dialect module: {exc}") from exc


def translate_spirv_module(spirv_mlir_text: str,
                           push_constants: dict[int, int] | None = None) -> list[WGSLExecutable]:
    """Translate every entry point of a spirv-dialect module (MLIR text) into a WGSL executable.

    With `push_constants` (index → 32-bit value) the push constants become WGSL constants; otherwise
    they are read from a uniform buffer bound after the storage buffers."""
    ctx, module = _parse(spirv_mlir_text)
    with ctx:
        return [exe for spirv_module in _spirv_modules(module)
                for exe in _translate_one(spirv_module, push_constants)]


def _translate_one(spirv_module, push_constants) -> list[WGSLExecutable]:
    globals_ = collect_globals(spirv_module)
    ops = list(spirv_module.regions[0].blocks[0].operations)
    funcs = {op.attributes["sym_name"].value: op for op in ops if op.name == "spirv.func"}
    sizes = {}
    for op in ops:
        if op.name == "spirv.ExecutionMode" and "LocalSize" in str(op.attributes["execution_mode"]):
            sizes[str(op.attributes["fn"]).lstrip("@").strip('"')] = tuple(
                int(str(v).split(":")[0]) for v in op.attributes["values"])
    entries = [str(op.attributes["fn"]).lstrip("@").strip('"') for op in ops if op.name == "spirv.EntryPoint"]
    if not entries:
        raise UnsupportedSpirvError("spirv.module has no spirv.EntryPoint")
    if len(funcs) != len(entries):
        raise UnsupportedSpirvError("calls between spirv.funcs are not supported (only entry points)")
    return [_translate_entry(name, funcs[name], sizes.get(name, (1, 1, 1)), globals_, push_constants)
            for name in entries]


def _translate_entry(name, func, workgroup_size, globals_: dict[str, GlobalVar],
                     push_constants) -> WGSLExecutable:
    for var in globals_.values():
        if var.storage is not None:
            var.storage.written = var.storage.atomic = False
    for op in _walk_ops(func):
        if op.name in _ATOMIC_OPS:
            symbol = _root_symbol(op.operands[0])
            var = globals_.get(symbol)
            if var is None or var.storage is None:
                raise UnsupportedSpirvError(f"{op.name} on non-storage memory is not supported")
            if op.name not in ATOMIC_RMW:
                raise UnsupportedSpirvError(f"{op.name} is not supported by the WGSL translator")
            var.storage.atomic = True
        elif op.name == "spirv.Store" and _half_word_store(globals_.get(_root_symbol(op.operands[0]))):
            # An f16 written into a binding merged to u32 words: two invocations may own the two halves
            # of one word, so the halves are updated with atomicAnd/atomicOr.
            globals_[_root_symbol(op.operands[0])].storage.atomic = True
    namer = TypeNamer()
    helpers = Helpers(namer)
    first = FunctionEmitter(func, globals_, namer, helpers, push_constants)
    first.emit()
    emitter = FunctionEmitter(func, globals_, namer, helpers, push_constants, frozenset(first.escaping))
    emitter.emit()
    if emitter.escaping - first.escaping:
        raise UnsupportedSpirvError("internal: value scoping did not converge")
    return _assemble(name, workgroup_size, globals_, namer, helpers, emitter)


def _assemble(name, workgroup_size, globals_, namer: TypeNamer, helpers: Helpers,
              emitter: FunctionEmitter) -> WGSLExecutable:
    decls: list[str] = []
    groups = sorted({(v.storage.set, v.storage.binding): v.storage
                     for v in globals_.values() if v.storage is not None}.items())
    bindings: list[Binding] = []
    atomics: set[int] = set()
    for i, (_, group) in enumerate(groups):
        access = "read_write" if group.written or group.atomic else "read"
        if group.merged:
            elem = "atomic<u32>" if group.atomic else "u32"
        else:
            elem = namer.name(next(iter(group.elem_types.values())))
        if group.atomic:
            atomics.add(i)
        decls.append(f"@group(0) @binding({i}) var<storage, {access}> {group.name}: array<{elem}>;")
        bindings.append(Binding(group.set, group.binding, access, i))
    push_count, push_binding = 0, None
    for var in globals_.values():
        if var.kind == "push":
            push_count = push_constant_count(var)
            if emitter.used_push:
                push_binding = len(bindings)
                decls.append(f"@group(0) @binding({push_binding}) var<uniform> pc: "
                             f"array<vec4<u32>, {-(-push_count // 4)}>;")
        elif var.kind in ("workgroup", "private"):
            decls.append(f"var<{var.kind}> {var.name}: {namer.name(var.pointee)};")
    decls += emitter.module_consts
    for const_name, bits in sorted(emitter.nonfinite.items()):
        # A private variable, not a const: WGSL constant folding rejects NaN/inf results.
        decls.append(f"var<private> {const_name}: u32 = {bits};")
    params = [f"@builtin({BUILTINS[b][0]}) {BUILTINS[b][0]}: {BUILTINS[b][1]}"
              for b in sorted(emitter.used_builtins)]
    entry = _wgsl_ident(name)
    x, y, z = workgroup_size
    body = [f"  {line}" for line in emitter.top] + emitter.lines
    if "WorkgroupId" in emitter.used_builtins and "GlobalInvocationId" not in emitter.used_builtins:
        params, prologue = _foldable_workgroup_ids(emitter.used_builtins)
        decls.append(f"override {WORKGROUP_FOLD_OVERRIDE}: u32 = 0u;")
        body = prologue + body
    parts = []
    enables = [ext for ext, used in (("f16", namer.uses_f16), ("subgroups", emitter.uses_subgroups)) if used]
    if enables:
        parts.append("".join(f"enable {ext};\n" for ext in enables))
    if emitter.uses_subgroups:
        # IREE emits subgroup ops where it knows all invocations of a subgroup are active.
        parts.append("diagnostic(off, subgroup_uniformity);\n")
    parts += namer.declarations
    parts.append("\n".join(decls) + "\n")
    parts += list(helpers.code.values())
    parts.append(f"@compute @workgroup_size({x}, {y}, {z})\nfn {entry}({', '.join(params)}) {{\n"
                 + "\n".join(body) + "\n}\n")
    code = "\n".join(parts)
    features = frozenset({"f16": "shader-f16", "subgroups": "subgroups"}[ext] for ext in enables)
    return WGSLExecutable(name, entry, code, (x, y, z), bindings, push_count, push_binding, atomics, features)
