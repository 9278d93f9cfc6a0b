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


INT64_GUARD = Pass("int64-guard", run=check_int64_constants)


def high_pass_manager(dump: Callable[[str, str], None] | None = None) -> PassManager:
    """The high pipeline: decompose, guard int64 demotion, canonicalise."""
    return PassManager([DECOMPOSE, INT64_GUARD, CANONICALIZE], dump=dump)


def run_high_passes(module: Any, dump: Callable[[str, str], None] | None = None) -> PassManager:
    """Run the high pipeline on a torch_mlir module in place; returns the manager (for its timings)."""
    from torch_mlir.passmanager import PassManager as TorchMlirPassManager

    manager = high_pass_manager(dump)
    manager.run(module, TorchMlirPassManager)
    return manager
