"""Module-level resources of a spirv.module: storage bindings, workgroup memory, builtins, push constants."""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import UnsupportedSpirvError
from .op_tables import BUILTINS
from .types import Array, Pointer, Scalar, SpirvType, Struct, Vector, parse_type, size_align


@dataclass(frozen=True)
class Binding:
    """One IREE descriptor (set, binding) and the dense @group(0) @binding it became in WGSL."""

    set: int
    binding: int
    access: str  # 'read' | 'read_write'
    wgsl_binding: int


@dataclass
class StorageBinding:
    """All SPIR-V variables on one (set, binding): one WGSL array, merged to u32 words when they differ."""

    set: int
    binding: int
    name: str = ""
    elem_types: dict[str, SpirvType] = field(default_factory=dict)  # variable symbol → element type
    written: bool = False
    atomic: bool = False

    @property
    def merged(self) -> bool:
        """True when accesses go through u32 words (aliased variables of different types, or atomics)."""
        return self.atomic or len(set(self.elem_types.values())) > 1


@dataclass
class GlobalVar:
    """A module-scope variable and what it is in WGSL."""

    symbol: str
    kind: str  # 'storage' | 'workgroup' | 'private' | 'builtin' | 'push'
    pointee: SpirvType
    name: str = ""
    storage: StorageBinding | None = None
    builtin: str | None = None


def _attr_int(op, name: str) -> int:
    return int(str(op.attributes[name]).split(":")[0])


def _root_array_elem(t: SpirvType, symbol: str) -> SpirvType:
    """Element type of IREE's storage buffer shape struct{rtarray<T>} (or struct{array<N x T>})."""
    if isinstance(t, Struct) and len(t.members) == 1 and isinstance(t.members[0], Array):
        elem = t.members[0].elem
        if isinstance(elem, (Scalar, Vector)):
            return elem
    raise UnsupportedSpirvError(f"storage buffer {symbol} of type {t}: only struct{{array<scalar|vector>}} "
                                "buffers are supported")


def collect_globals(module_op) -> dict[str, GlobalVar]:
    """Every spirv.GlobalVariable of the module, classified, with storage variables grouped by binding."""
    result: dict[str, GlobalVar] = {}
    bindings: dict[tuple[int, int], StorageBinding] = {}
    for op in module_op.regions[0].blocks[0].operations:
        if op.name != "spirv.GlobalVariable":
            continue
        symbol = op.attributes["sym_name"].value
        ptr = parse_type(str(op.attributes["type"]).strip())
        if not isinstance(ptr, Pointer):
            raise UnsupportedSpirvError(f"global {symbol} is not a pointer")
        storage_class = ptr.storage
        if "built_in" in op.attributes:
            builtin = op.attributes["built_in"].value
            if builtin not in BUILTINS:
                raise UnsupportedSpirvError(f"builtin {builtin} has no WGSL compute equivalent")
            result[symbol] = GlobalVar(symbol, "builtin", ptr.pointee, BUILTINS[builtin][0], builtin=builtin)
        elif storage_class == "StorageBuffer":
            key = (_attr_int(op, "descriptor_set"), _attr_int(op, "binding"))
            group = bindings.setdefault(key, StorageBinding(*key))
            group.elem_types[symbol] = _root_array_elem(ptr.pointee, symbol)
            result[symbol] = GlobalVar(symbol, "storage", ptr.pointee, storage=group)
        elif storage_class == "Workgroup":
            result[symbol] = GlobalVar(symbol, "workgroup", ptr.pointee)
        elif storage_class == "Private":
            result[symbol] = GlobalVar(symbol, "private", ptr.pointee)
        elif storage_class == "PushConstant":
            result[symbol] = GlobalVar(symbol, "push", ptr.pointee, name="pc")
        else:
            raise UnsupportedSpirvError(f"global {symbol} in storage class {storage_class} is not supported")
    for i, key in enumerate(sorted(bindings)):
        bindings[key].name = f"b{i}"
    counter = 0
    for var in result.values():
        if var.kind in ("workgroup", "private"):
            var.name = f"{var.kind[:2]}{counter}"
            counter += 1
    for group in bindings.values():
        for symbol, elem in group.elem_types.items():
            # Scalar f16 elements read as halves of a word; other sub-word shapes have no word form.
            half = isinstance(elem, Scalar) and elem.kind == "f16"
            if group.merged and size_align(elem)[0] % 4 and not half:
                raise UnsupportedSpirvError(
                    f"aliased storage variable {symbol} has {elem} elements; merging needs 32-bit words")
    return result


def push_constant_count(var: GlobalVar) -> int:
    """Number of 32-bit push constants of IREE's struct{array<N x i32>} push constant block."""
    t = var.pointee
    if isinstance(t, Struct) and len(t.members) == 1 and isinstance(t.members[0], Array):
        arr = t.members[0]
        if isinstance(arr.elem, Scalar) and arr.elem.kind in ("i32", "u32", "f32") and arr.count:
            return arr.count
    raise UnsupportedSpirvError(f"push constant block of type {t} is not IREE's array of 32-bit values")
