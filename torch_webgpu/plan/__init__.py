"""The runtime of the low IR: a compiled graph's plan, and what runs it on the WebGPU runtime.

**What a plan is** (format.py). A `Plan` is self-contained: its inputs and outputs (`TensorSpec`: shape,
torch dtype, device dtype: dtypes.py), named buffers with their sizes, one-time `init` nodes and per-call
`main` nodes (`LowIRNode`: allocate, free, upload a constant, dispatch, copy, fill, barrier, output), the
WGSL of every entry point (`ExecutableSpec`: how host bindings map onto its @binding slots and where its
push constants go), its constants, and the map from its outputs to the graph's. In a dynamic plan, any
size, offset, grid or push constant may be an index expression of the inputs' dims (host_expr.py); a 1-D
grid past the device's per-dimension limit is folded when the shader declares the override (grid.py).
It serialises to plan.json + one .wgsl per entry point + constants.safetensors, the heart of a bundle.

**How it runs** (compiled.py: `lowering(plan)` gives a `CompiledPlan`). Loading allocates the plan's
buffers (buffers.py; per-call buffers share storage by liveness: memory.py), picks each library dispatch's
variant on this device (tuning.py), builds the pipelines (pipelines.py) and runs `init`. A call resolves
the plan for its input shapes (layout.py), binds the inputs (binding.py) and records every `main` node
into the runtime's open encoder, reading all host-bound outputs back with one submit (outputs.py). Two
executors record the same nodes: the Python one, the reference (python_executor.py: `SHADER_TO_FUNC`), and
the native one (native_executor.py: the nodes as one C++ command program per layout), the default where
the extension is built; TORCH_WEBGPU_EXECUTOR=check compares them bit for bit (check.py), and a static
plan's steady-state calls skip the general path (fast_call.py). int64 crosses the boundary as int32,
converted on the device (int64.py); outputs can stay on the device without torch (`DeviceArray`).

**The other implementation.** `torch-webgpu.js` (torch_webgpu/web/) implements the same contract in
JavaScript (plan format, host expressions, folded grids, load-time tuning, every node's meaning);
tests/web/test_low_ir.py runs hand-written plans that use every op through both and checks both against
numpy: the conformance test of the two executors.

**Layering.** plan/ imports only runtime/, kernels/ (the autotuner; torch-free), the `_native_plan`
extension (through runtime/native.py), numpy and safetensors: the compiler (compiler/) produces plans, the
bundle loaders (bundle/) load them through this package alone, and neither torch nor torch-mlir nor IREE
is needed to run one. Torch is never imported at module level here; torch_tensors.py is the one seam,
importing it inside functions that run only for calls whose inputs are torch tensors (so the caller has
imported it already). tests/test_layers.py checks all of this.
"""

from __future__ import annotations

from .compiled import CompiledPlan, lowering
from .device_array import DeviceArray
from .format import PLAN_FORMAT_VERSION, ExecutableSpec, LowIRNode, LowIROp, Plan, TensorSpec
from .python_executor import SHADER_TO_FUNC

__all__ = [
    "PLAN_FORMAT_VERSION", "SHADER_TO_FUNC", "CompiledPlan", "DeviceArray", "ExecutableSpec", "LowIRNode",
    "LowIROp", "Plan", "TensorSpec", "lowering",
]
