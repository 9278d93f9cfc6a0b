"""Memory: access chains as symbolic pointers; loads, stores and atomics on storage, workgroup,
function and push-constant variables; aliased bindings merged into u32 words."""

from __future__ import annotations

from dataclasses import dataclass

from . import op_tables as T
from .errors import UnsupportedSpirvError
from .resources import GlobalVar
from .types import Array, Pointer, Scalar, SpirvType, Struct, Vector, scalar_of, size_align, value_type


def _is_f16(t: SpirvType) -> bool:
    return isinstance(t, Scalar) and t.kind == "f16"


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


class MemoryOps:
    """FunctionEmitter mixin: pointers and memory operations."""

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
        if isinstance(elem, Scalar) and elem.kind == "f16":
            # Half of a word: the caller reads it (a store would race with the other half's writer).
            return [f"{group.name}[u32({e}) / 2u]", f"u32({e}) % 2u"], elem
        words = size_align(elem)[0] // 4
        base = f"{e}" if words == 1 else f"({e}) * {words}"
        if comp is not None:
            if scalar_of(elem).kind == "f16":
                raise UnsupportedSpirvError("component access into f16 vectors of an aliased binding")
            return [f"{group.name}[{base} + {comp}]"], ptr.pointee
        return [f"{group.name}[{base} + {k}]" if k else f"{group.name}[{base}]" for k in range(words)], elem

    def _from_words(self, words: list[str], t: SpirvType) -> str:
        if isinstance(t, Scalar) and t.kind == "f16":
            return f"bitcast<vec2<f16>>({words[0]})[{words[1]}]"
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
        """WGSL reference expression for a pointer into a non-merged variable."""
        ptr: Ptr = self.ptrs[op.operands[0]]
        root, t = ptr.root, value_type(op.results[0])
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
                # an f16 element's second entry is its half index, not a word
                words = [f"atomicLoad(&{w})" if k == 0 or not _is_f16(wt) else w for k, w in enumerate(words)]
            self.define(op.results[0], self._from_words(words, wt))
        else:
            self.define(op.results[0], self.ref(ptr))

    def _push_constant(self, ptr: Ptr, t: SpirvType) -> str:
        """spirv.Load from any storage class (builtins, push constants, merged words)."""
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
        """spirv.Store (merged bindings: one u32 word at a time)."""
        ptr: Ptr = self.ptrs[op.operands[0]]
        value = self.expr(op.operands[1])
        root = ptr.root
        if isinstance(root, GlobalVar) and root.kind == "storage":
            root.storage.written = True
            if root.storage.merged:
                words, wt = self._word_refs(ptr)
                if _is_f16(wt):
                    if not root.storage.atomic:
                        raise UnsupportedSpirvError("internal: half-word f16 store missed by the prepass")
                    word, half = words
                    shift = self.fresh("sh")
                    self.line(f"let {shift} = 16u * ({half});")
                    self.line(f"atomicAnd(&{word}, ~(0xffffu << {shift}));")
                    bits = f"bitcast<u32>(vec2<f16>({value}, 0.0h)) & 0xffffu"
                    self.line(f"atomicOr(&{word}, ({bits}) << {shift});")
                    return
                for w, v in zip(words, self._to_words(value, wt, len(words)), strict=False):
                    self.line(f"atomicStore(&{w}, {v});" if root.storage.atomic else f"{w} = {v};")
                return
        elif isinstance(root, GlobalVar) and root.kind in ("builtin", "push"):
            raise UnsupportedSpirvError(f"store to a {root.kind} variable")
        self.line(f"{self.ref(ptr)} = {value};")

    def emit_atomic(self, op) -> None:
        """spirv.Store (merged bindings: one u32 word at a time)."""
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
        """Atomic read-modify-write on a u32 word of an atomic binding."""
        ptr_t = value_type(op.results[0])
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
        """Function-storage spirv.Variable → function-scope var."""
        base: Ptr = self.ptrs[op.operands[0]]
        indices = tuple(list(op.operands)[1:])
        ptr_t = value_type(op.results[0])
        assert isinstance(ptr_t, Pointer)
        self.ptrs[op.results[0]] = Ptr(base.root, base.indices + indices, ptr_t.pointee)

    def emit_addressof(self, op) -> None:
        """AccessChain → symbolic pointer (indices resolved at load/store)."""
        symbol = str(op.attributes["variable"]).lstrip("@").strip('"')
        var = self.globals[symbol]
        self.ptrs[op.results[0]] = Ptr(var, (), var.pointee)
