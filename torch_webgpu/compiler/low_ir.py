"""Low IR, the compiler's output: `LowIROp`, `LowIRNode`, `Plan` (the plan format lives in
torch_webgpu/plan/format.py; these names stay here for the code written against the compiler)."""

from torch_webgpu.plan.format import PLAN_FORMAT_VERSION, ExecutableSpec, LowIRNode, LowIROp, Plan, TensorSpec

__all__ = ["PLAN_FORMAT_VERSION", "ExecutableSpec", "LowIRNode", "LowIROp", "Plan", "TensorSpec"]
