"""`lowering(plan)`, the callable that runs a plan, and `SHADER_TO_FUNC`, the Python executor's function
per LowIROp (the plan runtime lives in torch_webgpu/plan/; these names stay here for the code written
against the compiler)."""

from torch_webgpu.plan.compiled import CompiledPlan, lowering
from torch_webgpu.plan.device_array import DeviceArray
from torch_webgpu.plan.python_executor import SHADER_TO_FUNC

__all__ = ["SHADER_TO_FUNC", "CompiledPlan", "DeviceArray", "lowering"]
