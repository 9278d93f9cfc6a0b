"""`lowering(plan)`: a plan loaded onto the runtime (`CompiledPlan`), called with the graph's inputs.

Loading makes everything that lives as long as the plan once: its buffers and weights (buffers.py; plan
memory slots shared by liveness, memory.py), the choice of each tunable dispatch (tuning.py), the
pipelines (pipelines.py), the layout of a static plan (layout.py), and runs the init nodes. A call then
takes one of two paths:

- the fast call (fast_call.py), once a call has shown it applies: webgpu tensors in, the native program
  recorded with the inputs' and new outputs' buffers, nothing else;
- the general path: inputs checked and bound (binding.py), the executor chosen (the layout's native
  program, checked against the Python executor the first time in check mode: check.py; or the Python
  executor), which records every node and returns the outputs (outputs.py).

Either way the call records into the runtime's one open encoder and reads every host-bound output back
with a single submit. numpy arrays in give numpy arrays out, so saved plans (bundles) run without torch.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from torch_webgpu.runtime import get_runtime
from torch_webgpu.runtime.native import executor_choice, native_available

from . import host_expr
from .binding import InputBinder, is_webgpu
from .buffers import PlanBuffers, lifted_constants
from .call import CallState, Executor
from .check import CheckedNative
from .device_array import free_all
from .fast_call import FastCall
from .format import LowIROp, Plan
from .int64 import Int64Narrowing
from .layout import ALIGN, Layout, Layouts
from .memory import assign_memory
from .memory import enabled as plan_memory_enabled
from .native_executor import NativeLayout, NativeUnsupported, build_native_layout
from .outputs import graph_output, numpy_mode
from .phases import phase
from .pipelines import Pipelines
from .python_executor import PYTHON_EXECUTOR, run_nodes
from .tuning import tune_plan


class CompiledPlan:
    """A plan bound to the runtime: call it with the graph's inputs, get its outputs.

    `executor` is "native" where the native executor is available (runtime/native.py), else "python";
    setting it to "python" makes every later call take the Python executor."""

    def __init__(self, plan: Plan, rt: Any = None, shader_source: str = "wgsl",
                 constant_buffers: Mapping[str, int] | None = None,
                 slot_buffers: Mapping[str, int] | None = None):
        self.rt = rt or get_runtime()
        self.memory = None   # memory.MemoryReport: per-call buffers sharing storage by liveness
        if plan_memory_enabled():
            plan, self.memory = assign_memory(plan)
        self.plan = plan
        # Lifted constants already on the device (weights shared with another plan): bound, not uploaded.
        shared = dict(constant_buffers or {})
        self.shader_source = shader_source
        self.calls = 0
        self.executor = "native" if native_available(self.rt) else "python"
        self.check_native = executor_choice() == "check"
        self.native_unsupported: str | None = None   # why a layout fell back to the Python executor
        self.fast_call: FastCall | None = None   # the steady-state call, once a general call qualified
        self.buffers = PlanBuffers(self.rt)
        self.narrowing = Int64Narrowing(self.rt, self.buffers.allocate)
        self.binder = InputBinder(plan.inputs, self.buffers.static, self.rt, self.narrowing,
                                  int(self.rt.info.limits.get("min-storage-buffer-offset-alignment", ALIGN)))
        self.buffers.place_static(plan, self.memory.slots if self.memory is not None else {},
                                  slot_buffers or {})
        self.buffers.place_constants(plan, shared)
        # Tuned once the plan's buffers and weights exist: variants read the weights in place.
        with phase("autotune"):
            self.plan = plan = tune_plan(plan, self.rt, resident=self.buffers.static)
        with phase("pipelines"):
            self.pipelines = Pipelines(plan, self.rt, shader_source)
        self.dynamic = any(d is None for spec in plan.inputs for d in spec.shape)
        if host_expr.contains_expression([n.args for n in plan.init]):
            raise ValueError("a plan's init nodes cannot depend on the input shapes")
        init_dispatches = {id(n): self.pipelines.prepare(n) for n in plan.init if n.op is LowIROp.DISPATCH}
        self.layouts = Layouts(plan, self.pipelines, self.buffers,
                               [tuple(v.shape) for _, v in lifted_constants(plan)])
        if not self.dynamic:
            self.layouts.get([tuple(spec.shape) for spec in plan.inputs])
        init = [n for n in plan.init
                if not (n.op is LowIROp.UPLOAD_CONSTANT and n.args["constant"] in shared)]
        run_nodes(CallState(self.buffers, plan.constants, self.narrowing, dict(self.buffers.static),
                            init_dispatches), init)
        # Buffers go back to the pool when the compiled graph is dropped (torch._dynamo.reset, GC).
        weakref.finalize(self, free_all, self.rt, self.buffers.owned)

    # -- calls --
    def __call__(self, *args: Any) -> list[Any]:
        """Run the graph once; outputs on the inputs' device (numpy arrays for numpy inputs)."""
        fast = self.fast_call
        if fast is not None:
            results = fast(args)
            if results is not None:
                return results
        keep_alive: list[Any] = []   # device temporaries bound by id: alive until the call is recorded
        with self.rt.lock:
            state = self._bind(args, keep_alive)
            native = self._native_for_call(state)
            outputs = self._executor(native).run(state, args, numpy_mode(args))
            del keep_alive   # every use is recorded: freeing now is ordered after them
            if fast is None and native is not None:
                self.fast_call = self._fast_call(state, native, args)
        self.calls += 1
        return [graph_output(i, outputs, args) for i in self.plan.output_map]

    def run_resident(self, args: Sequence[Any], resident: Sequence[int] = ()) -> list[Any]:
        """Run the graph once without torch: inputs are numpy arrays or DeviceArrays (bound zero-copy),
        the plan outputs numbered in `resident` stay on the device as DeviceArrays, the others come back
        as numpy arrays (the only readback). When every output stays on the device the native executor
        records the call (where it covers the plan), else the Python executor."""
        with self.rt.lock:
            layout = self.layouts.get(self.binder.shapes(args))
            buffers = self.binder.bind(args, layout, [])
            state = self._call_state(layout, buffers, None, resident=frozenset(resident))
            outputs = self._executor(self._native_for_resident(state)).run(state, args, True)
        self.calls += 1
        return [graph_output(i, outputs, args) for i in self.plan.output_map]

    def _bind(self, args: Sequence[Any], keep_alive: list[Any]) -> CallState:
        """A call's inputs checked and bound to its layout's buffers, its outputs bound for the inputs'
        device (int64 webgpu inputs are left for the native program to narrow, where one may run)."""
        layout = self.layouts.get(self.binder.shapes(args))
        narrowed: list[tuple] | None = [] if self._native_allowed() else None
        buffers = self.binder.bind(args, layout, keep_alive, narrowed)
        to_device = next((t.device for t in args if is_webgpu(t)), None)
        return self._call_state(layout, buffers, to_device, narrowed=narrowed)

    def _call_state(self, layout: Layout, buffers: dict[str, tuple[int, int]], to_device: Any,
                    resident: frozenset[int] = frozenset(), narrowed: list[tuple] | None = None) -> CallState:
        return CallState(self.buffers, self.plan.constants, self.narrowing, buffers, layout.dispatches,
                         layout, to_device, resident, narrowed)

    # -- the executor of a call --
    def _native_allowed(self) -> bool:
        return self.executor == "native" and not self.rt.profiling

    def _native(self, layout: Layout, device_outputs: bool, narrowed: tuple[int, ...]) -> NativeLayout | None:
        """The layout's native program for this output mode and these device-narrowed int64 inputs, or
        None where the Python executor runs (TORCH_WEBGPU_EXECUTOR=python, no native extension, a
        profiled call, or nodes it does not cover)."""
        if not self._native_allowed():
            return None
        key = (device_outputs, narrowed)
        if key not in layout.native:
            try:
                layout.native[key] = build_native_layout(layout, self.plan, self.buffers, self.narrowing,
                                                         device_outputs, narrowed)
            except NativeUnsupported as exc:
                layout.native[key] = None
                self.native_unsupported = str(exc)
        return layout.native[key]

    def _native_for_call(self, state: CallState) -> NativeLayout | None:
        """The native program for a call of the graph bound in `state`, or None for the Python executor."""
        native = self._native(state.layout, state.to_device is not None, state.narrowed_inputs)
        if native is not None and native.writes_inputs and not native.inputs_distinct(state.buffers):
            return None   # inputs that share a buffer, one of them written: aliasing, per call
        return native

    def _native_for_resident(self, state: CallState) -> NativeLayout | None:
        """The native program for a resident call (every output kept on the device, none converted), or
        None for the Python executor."""
        outputs = state.layout.outputs
        if not (self._native_allowed() and state.resident >= set(range(len(outputs)))
                and all(o.dtype == o.device_dtype for o in outputs)):
            return None
        native = self._native(state.layout, True, ())
        if native is not None and native.writes_inputs:
            return None   # aliasing between inputs is the Python executor's to handle
        return native

    def _executor(self, native: NativeLayout | None) -> Executor:
        """What runs a call: the native program (TORCH_WEBGPU_EXECUTOR=check: checked against the Python
        executor on its first call), or the Python executor where there is none."""
        if native is None:
            return PYTHON_EXECUTOR
        if self.check_native and not native.checked:
            return CheckedNative(native, self.plan.inputs, self.plan.meta.get("name", "plan"))
        return native

    def _fast_call(self, state: CallState, native: NativeLayout, args: Sequence[Any]) -> FastCall | None:
        """The fast call of this call's layout, when its inputs and program qualify (else None)."""
        layout = state.layout
        if self.dynamic or (self.check_native and not native.checked) or not FastCall.applies(native, layout,
                                                                                               args):
            return None
        fast = FastCall(self, layout, native, args[0].device, state.narrowed_inputs, self.plan.inputs,
                        self.buffers.static, self.plan.output_map, self.binder.alignment, self.narrowing)
        return fast if fast.binds(args) else None

    def release(self) -> None:
        """Give the plan's buffers back to the runtime pool."""
        self.buffers.release()


def lowering(plan: Plan, rt: Any = None, shader_source: str = "wgsl",
             constant_buffers: Mapping[str, int] | None = None,
             slot_buffers: Mapping[str, int] | None = None) -> CompiledPlan:
    """The callable that runs `plan` on the runtime (one command buffer per call); `constant_buffers`:
    buffer ids of lifted constants already uploaded (shared with another plan), by constant name;
    `slot_buffers`: buffers for the plan's memory slots (memory.shared_slot_sizes), shared by plans
    whose calls never overlap (the phases of one decode bundle); the caller owns them."""
    return CompiledPlan(plan, rt, shader_source, constant_buffers, slot_buffers)
