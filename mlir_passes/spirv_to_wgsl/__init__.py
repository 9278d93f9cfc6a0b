"""Translator from IREE's `spirv` dialect executables to WGSL (Dawn and naga cannot take IREE's SPIR-V as is).

    from mlir_passes.spirv_to_wgsl import translate_spirv_module
    for exe in translate_spirv_module(spirv_mlir_text, push_constants=None):
        exe.code, exe.entry_point, exe.workgroup_size, exe.bindings, exe.push_constant_binding
"""

from .errors import UnsupportedSpirvError
from .module import WGSLExecutable, translate_spirv_module
from .resources import Binding

__all__ = ["Binding", "UnsupportedSpirvError", "WGSLExecutable", "translate_spirv_module"]
