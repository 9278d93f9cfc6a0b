"""High passes on the torch dialect: torch-mlir's decompositions to the backend contract, the guarded
64-bit demotion check, and canonicalisation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .pass_manager import Pass, PassManager

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1

# torch-mlir's FX pipeline: decomposes ops IREE lacks (SDPA, var/mean statistics, ...) and reaches the
# value-semantics backend contract that IREE's torch input conversion accepts.
DECOMPOSE = Pass("decompose", pipeline=(
    "builtin.module(func.func(torch-match-quantized-custom-ops), "
    "torchdynamo-export-to-torch-backend-pipeline{ extra-library=})"))
CANONICALIZE = Pass("canonicalize", pipeline="builtin.module(canonicalize)")


class Int64RangeError(OverflowError):
    """An int64 constant does not fit in the int32 the WebGPU shaders compute with."""


def _walk(op: Any, visit: Callable[[Any], None]) -> None:
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                visit(inner)
                _walk(inner.operation, visit)


def check_int64_constants(module: Any) -> None:
    """IREE demotes i64 to i32 (WebGPU has no 64-bit ints): refuse constants that would wrap."""
    def visit(op: Any) -> None:
        if op.operation.name == "torch.constant.int":
            text = str(op.operation.attributes["value"]).split(":")[0].strip()
            value = int(text)
            if not INT32_MIN <= value <= INT32_MAX:
                raise Int64RangeError(
                    f"torch.constant.int {value} does not fit in int32; WebGPU shaders have no 64-bit "
                    "integers (keep integer constants within ±2**31)")
    _walk(module.operation, visit)


# Ops whose start/end operands torch clamps to the dim size: an INT64_MAX/MIN sentinel there (`x[..., a:]`)
# means "to the end" and is as good as the int32 extreme. Operand positions of (start, end).
_CLAMPED_BOUNDS = {
    "torch.aten.slice.Tensor": (2, 3),
    "torch.aten.slice_copy.Tensor": (2, 3),
    "torch.aten.slice_scatter": (3, 4),
}


def _int_value(op: Any) -> int:
    return int(str(op.operation.attributes["value"]).split(":")[0].strip())


def clamp_slice_sentinels(module: Any) -> None:
    """Rewrite out-of-int32 slice bounds (the `a:` / `:b` sentinels of every `x[..., a:]`) to the int32
    extreme of the same sign, when every use of the constant is such a clamped bound."""
    from torch_mlir.ir import IntegerAttr, IntegerType

    def clampable(op: Any) -> bool:
        uses = list(op.result.uses)
        return bool(uses) and all(
            u.owner.name in _CLAMPED_BOUNDS and u.operand_number in _CLAMPED_BOUNDS[u.owner.name]
            for u in uses)

    def visit(op: Any) -> None:
        if op.operation.name != "torch.constant.int":
            return
        value = _int_value(op)
        if INT32_MIN <= value <= INT32_MAX or not clampable(op):
            return
        with op.context:
            op.operation.attributes["value"] = IntegerAttr.get(
                IntegerType.get_signless(64), INT32_MAX if value > 0 else INT32_MIN)
    _walk(module.operation, visit)


CLAMP_SENTINELS = Pass("clamp-slice-sentinels", run=clamp_slice_sentinels)
INT64_GUARD = Pass("int64-guard", run=check_int64_constants)


def high_pass_manager(dump: Callable[[str, str], None] | None = None) -> PassManager:
    """The high pipeline: decompose, clamp slice sentinels, guard int64 demotion, canonicalise."""
    return PassManager([DECOMPOSE, CLAMP_SENTINELS, INT64_GUARD, CANONICALIZE], dump=dump)


def run_high_passes(module: Any, dump: Callable[[str, str], None] | None = None) -> PassManager:
    """Run the high pipeline on a torch_mlir module in place; returns the manager (for its timings)."""
    from torch_mlir.passmanager import PassManager as TorchMlirPassManager

    manager = high_pass_manager(dump)
    manager.run(module, TorchMlirPassManager)
    return manager
