"""Translator from IREE's `spirv` dialect executables to WGSL (Dawn and naga cannot take IREE's SPIR-V as is).

    from mlir_passes.spirv_to_wgsl import translate_spirv_module
    for exe in translate_spirv_module(spirv_mlir_text, push_constants=None):
        exe.code, exe.entry_point, exe.workgroup_size, exe.bindings, exe.push_constant_binding

How SPIR-V becomes WGSL (one module per job):
- module.py: entry points, declarations, dense @group(0) bindings (IREE's (set, binding) sorted);
  `enable f16/subgroups` as needed (`WGSLExecutable.features` names the device features).
- resources.py: global variables. Storage buffers are `array<T>`; several variables on one binding
  (IREE aliasing) or any atomic on it → one `array<u32>` / `array<atomic<u32>>` accessed word by word.
- function.py: SSA values become `let`s (hoisted to `var`s when used outside their WGSL scope);
  spirv.mlir.loop/selection become `loop {}` / `if` with vars for block arguments.
- constants.py: exact literals; NaN/inf come from `bitcast` of a private u32 (never a const-expression).
- memory.py: access chains stay symbolic pointers; push constants are specialised literals or a uniform
  `array<vec4<u32>>` after the storage bindings.
- values.py + op_tables.py: declarative op tables; unsigned ops through bitcast<u32>; float compares,
  IsNan/IsInf and NMax/NMin test NaN by bit pattern (WGSL may assume no NaNs).
Anything else raises UnsupportedSpirvError naming the op or type.
"""

from .errors import UnsupportedSpirvError
from .module import WGSLExecutable, translate_spirv_module
from .resources import Binding

__all__ = ["Binding", "UnsupportedSpirvError", "WGSLExecutable", "translate_spirv_module"]
