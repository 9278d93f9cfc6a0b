"""Runs a low IR plan on the runtime: `lowering(plan)` returns the callable for one compiled graph.

Pipelines, push-constant uniforms, global and transient buffers are created once per plan (transients
stay pooled with the plan and are reused by every call); a call uploads host inputs, records every node
into the runtime's one open encoder and reads all host outputs back with a single submit.

torch is optional here: numpy arrays in give numpy arrays out, so saved plans (issue 6 bundles) run in a
process without torch.
"""

from __future__ import annotations

import math
import struct
import sys
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from mlir_passes import host_expr
from mlir_passes.dispatch_grid import WORKGROUP_FOLD_OVERRIDE, shader_grid
from torch_webgpu.runtime import BufferSlice, get_runtime
from torch_webgpu.runtime.native import buffer_handle, executor_choice, native_available

from .fast_call import FastCall
from .graph_outputs import graph_output
from .low_ir import LowIRNode, LowIROp, Plan, TensorSpec
from .native_plan import (
    NativeLayout,
    NativeUnsupported,
    assert_same_outputs,
    build_native_layout,
    mark_checked,
)
from .phases import phase
from .plan_memory import assign_memory
from .plan_memory import enabled as plan_memory_enabled
from .plan_tuning import tune_plan

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
_NP = {"float32": np.float32, "float16": np.float16, "int32": np.int32, "int16": np.int16, "int8": np.int8,
       "uint8": np.uint8, "bool": np.bool_}
_ITEMSIZE = {name: np.dtype(t).itemsize for name, t in _NP.items()}
ALIGN = 256
SCALAR = "index"   # device_dtype of a host scalar input (a symbolic int, dynamic=True): no buffer
_WIDEN_WORKGROUP = 64
# int64 outputs that stay on the device: IREE computes them as int32, the device stores 8 bytes.
_WIDEN_INT32_WGSL = """
@group(0) @binding(0) var<storage, read> src: array<i32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<uniform> p: vec4<u32>;  // count, src word offset, dst word offset, row length
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = g.x + g.y * p.w;
  if (i >= p.x) { return; }
  let v = src[p.y + i];
  dst[p.z + 2u * i] = bitcast<u32>(v);
  dst[p.z + 2u * i + 1u] = select(0u, 0xFFFFFFFFu, v < 0);
}
"""


# int64 webgpu inputs are narrowed on the device (no host round trip); a value outside int32 range sets
# `flag`, which the runtime reads after its next wait (compiled call's readback, synchronize, .cpu()).
_NARROW_INT64_WGSL = """
@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<storage, read_write> flag: array<u32>;
@group(0) @binding(3) var<uniform> p: vec4<u32>;  // count, src word offset, row length, unused
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = g.x + g.y * p.z;
  if (i >= p.x) { return; }
  let lo = src[p.y + 2u * i];
  let hi = src[p.y + 2u * i + 1u];
  dst[i] = lo;
  if (hi != select(0u, 0xFFFFFFFFu, (lo & 0x80000000u) != 0u)) { flag[0] = 1u; }
}
"""


def device_dtype(dtype: Any) -> str:
    """How a torch dtype crosses the plan boundary: 64-bit types are demoted (IREE does the same) and
    bool travels as int32 (see fx_import._bool_boundaries_as_int32)."""
    name = str(dtype).removeprefix("torch.")
    return {"int64": "int32", "float64": "float32", "bool": "int32"}.get(name, name)


def _shape_nbytes(shape: Sequence[int], device_dtype_name: str) -> int:
    # math.prod on Python ints: np.prod costs microseconds per call, and this runs per input per call.
    return math.prod(int(d) for d in shape) * _ITEMSIZE[device_dtype_name]


def _nbytes(spec: TensorSpec) -> int:
    return _shape_nbytes(spec.shape, spec.device_dtype)


_INPUT_NAMES = tuple(f"in{k}" for k in range(64))   # the plan's names of its inputs' buffers


def _is_webgpu(t: Any) -> bool:
    return hasattr(t, "device") and not isinstance(t, np.ndarray) and t.device.type not in ("cpu", "meta")


_DTYPE_FACTS: dict[Any, tuple[bool, str | None]] = {}


def _dtype_facts(dtype: Any) -> tuple[bool, str | None]:
    """(is int64, its name if it crosses the plan boundary unchanged, else None) of a torch dtype; cached:
    this runs per input per call, and the string work behind it costs microseconds."""
    facts = _DTYPE_FACTS.get(dtype)
    if facts is None:
        name = str(dtype).removeprefix("torch.")
        facts = _DTYPE_FACTS[dtype] = (name == "int64", name if device_dtype(dtype) == name else None)
    return facts


def _numpy_mode(args: Sequence[Any]) -> bool:
    """Numpy results when torch is absent or every input is a numpy array."""
    if sys.modules.get("torch") is None:
        return True
    return bool(args) and all(isinstance(a, np.ndarray) for a in args)


class DeviceArray:
    """A plan output kept on the device without torch (`CompiledPlan.run_resident`): its own runtime
    buffer, which another call takes as an input zero-copy (a KV cache, logits for a device sampler)."""

    def __init__(self, rt: Any, buffer: int, shape: Sequence[int], dtype: str, offset: int = 0):
        self.rt, self.buffer, self.offset = rt, buffer, offset
        self.shape, self.dtype = tuple(int(d) for d in shape), dtype   # dtype: the device dtype's name
        self._finalizer = weakref.finalize(self, free_all, rt, [buffer])

    @property
    def nbytes(self) -> int:
        """Bytes of the array's elements."""
        return _shape_nbytes(self.shape, self.dtype)

    def numpy(self) -> np.ndarray:
        """The array read back to the host."""
        size = -(-self.nbytes // 4) * 4
        raw = self.rt.download(self.buffer, self.offset, size) if size else b""
        count = math.prod(self.shape)
        return np.frombuffer(raw, dtype=_NP[self.dtype], count=count).copy().reshape(self.shape)

    def release(self) -> None:
        """Give the buffer back to the runtime pool now."""
        self._finalizer()

    def __repr__(self) -> str:
        return f"<DeviceArray {self.dtype}{list(self.shape)} in buffer {self.buffer}>"


class _State:
    """Per-call view of the plan's buffers (name -> (buffer id, base offset)) and prepared dispatches."""

    def __init__(self, compiled: CompiledPlan, buffers: dict[str, tuple[int, int]],
                 dispatches: dict[int, tuple]):
        self.compiled = compiled
        self.rt = compiled.rt
        self.buffers = buffers
        self.dispatches = dispatches

    def slice(self, name: str, offset: int, size: int) -> BufferSlice:
        buf_id, base = self.buffers[name]
        return BufferSlice(buf_id, base + offset, size)


def _run_dispatch(state: _State, node: LowIRNode) -> None:
    kernel, slots, uniform, read_only, workgroups = state.dispatches[id(node)]
    bindings: list[Any] = [uniform if slot is None else state.slice(*slot) for slot in slots]
    writable = {b.buffer_id for i, b in enumerate(bindings)
                if isinstance(b, BufferSlice) and i not in read_only}
    for i, b in enumerate(bindings):
        if i in read_only and isinstance(b, BufferSlice) and b.buffer_id in writable:
            # IREE may bind one buffer read-only and read-write in one dispatch; WebGPU forbids a
            # writable buffer in two bindings, so the read-only view reads a copy taken just before.
            scratch = state.compiled.scratch(id(node), i, b.nbytes)
            state.rt.copy(b.buffer_id, scratch, -(-b.nbytes // 4) * 4, b.offset, 0)
            bindings[i] = BufferSlice(scratch, 0, b.nbytes)
    state.rt.dispatch(kernel, bindings, workgroups, label=node.args["entry_point"])


def _run_fill(state: _State, node: LowIRNode) -> None:
    a = node.args
    buf_id, base = state.buffers[a["buffer"]]
    state.rt.fill(buf_id, a["pattern"], base + a["offset"], a["size"])


def _run_copy(state: _State, node: LowIRNode) -> None:
    a = node.args
    src, sbase = state.buffers[a["source"]]
    dst, dbase = state.buffers[a["buffer"]]
    if src == dst:
        # WebGPU refuses a copy within one buffer (IREE emits them inside transient buffers): bounce.
        scratch = state.compiled.scratch(id(node), 0, a["size"])
        state.rt.copy(src, scratch, a["size"], sbase + a["source_offset"], 0)
        src, sbase, a = scratch, 0, {**a, "source_offset": 0}
    state.rt.copy(src, dst, a["size"], sbase + a["source_offset"], dbase + a["offset"])


def _run_upload(state: _State, node: LowIRNode) -> None:
    buf_id, base = state.buffers[node.args["buffer"]]
    value = np.ascontiguousarray(state.compiled.plan.constants[node.args["constant"]])
    state.rt.upload(buf_id, value, base)


def _nothing(state: _State, node: LowIRNode) -> None:
    """Allocation, free and barriers need no command: buffers live with the plan, and WebGPU orders
    storage accesses between the dispatches of a pass."""


def _run_output(state: _State, node: LowIRNode) -> None:
    state.compiled.collect_output(state, node)


# Each LowIROp and the runtime function that executes it.
SHADER_TO_FUNC: dict[LowIROp, Callable[[_State, LowIRNode], None]] = {
    LowIROp.ALLOCATE: _nothing,
    LowIROp.FREE: _nothing,
    LowIROp.BARRIER: _nothing,
    LowIROp.UPLOAD_CONSTANT: _run_upload,
    LowIROp.DISPATCH: _run_dispatch,
    LowIROp.FILL: _run_fill,
    LowIROp.COPY: _run_copy,
    LowIROp.OUTPUT: _run_output,
}


class _Layout:
    """Everything of a plan that depends on the input shapes: resolved per-call nodes and outputs,
    buffers sized for them, dispatch bindings and uniforms, and the readback offsets. A static plan has
    one; a dynamic plan (dynamic=True) has one per input-shape signature."""

    def __init__(self, compiled: CompiledPlan, shapes: list[tuple[int, ...]]):
        plan = compiled.plan
        self.shapes = shapes
        self.main = [LowIRNode(n.op, host_expr.evaluate_all(n.args, shapes)) for n in plan.main]
        self.outputs = [TensorSpec([host_expr.evaluate(d, shapes) for d in o.shape], o.dtype, o.device_dtype)
                        for o in plan.outputs]
        self.owned: list[int] = []
        self.buffers: dict[str, tuple[int, int]] = {}
        for name, size in plan.buffers.items():
            if not host_expr.is_static(size):
                self.buffers[name] = (self._allocate(compiled, host_expr.evaluate(size, shapes)), 0)
        self.host_inputs: dict[str, tuple[int, int]] = {}
        for k, spec in enumerate(plan.inputs):
            if spec.device_dtype == SCALAR:
                continue
            nbytes = _shape_nbytes(shapes[k], spec.device_dtype)
            self.host_inputs[f"in{k}"] = (self._allocate(compiled, max(nbytes, 4)), 0)
        self.dispatches = {id(n): compiled.prepare_dispatch(n) for n in self.main if n.op is LowIROp.DISPATCH}
        # One readback buffer holds every host-bound output of a call (one submit per call).
        self.readback_offsets: dict[int, int] = {}
        total = 0
        for node in self.main:
            if node.op is LowIROp.OUTPUT and "buffer" in node.args:
                self.readback_offsets[node.args["index"]] = total
                total += -(-node.args["size"] // ALIGN) * ALIGN
        self.readback = self._allocate(compiled, max(total, 4))
        # (device outputs?, inputs narrowed on the device) -> native program (None: the Python executor)
        self.native: dict[tuple, NativeLayout | None] = {}

    def _allocate(self, compiled: CompiledPlan, size: int) -> int:
        buf = compiled.rt.allocate(max(int(size), 4))
        self.owned.append(buf)
        return buf


class CompiledPlan:
    """A plan bound to the runtime: call it with the graph's inputs, get its outputs."""

    MAX_LAYOUTS = 8   # input-shape signatures a dynamic plan keeps buffers for

    def __init__(self, plan: Plan, rt: Any = None, shader_source: str = "wgsl",
                 constant_buffers: Mapping[str, int] | None = None,
                 slot_buffers: Mapping[str, int] | None = None):
        self.rt = rt or get_runtime()
        self.memory = None   # plan_memory.MemoryReport: per-call buffers sharing storage by liveness
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
        self._fast: FastCall | None = None   # the steady-state call, once a general call showed it applies
        self._owned: list[int] = []
        self._scratch: dict[tuple[int, int], int] = {}
        self._scratch_pool: dict[int, list[tuple[int, int]]] = {}   # binding slot -> (bytes, buffer)
        self._overflow_flag: int | None = None   # set by the int64 narrowing kernel (see _narrow_int64)
        self._static: dict[str, tuple[int, int]] = {}
        # Per input: its shape as a tuple when fully static (a call's shape is compared with it at once).
        self._static_shapes = [tuple(spec.shape) if all(type(d) is int for d in spec.shape) else None
                               for spec in plan.inputs]
        self._offset_alignment = int(self.rt.info.limits.get("min-storage-buffer-offset-alignment", ALIGN))
        slots = self.memory.slots if self.memory is not None else {}
        for name, size in plan.buffers.items():
            if not host_expr.is_static(size):
                continue
            given = (slot_buffers or {}).get(name) if name in slots else None
            if given is not None and self.rt.buffer(given).nbytes >= size:
                self._static[name] = (given, 0)   # a slot shared with plans that never run meanwhile
            else:
                self._static[name] = (self._allocate(size), 0)
        n_user = len(plan.inputs)
        uploaded = {n.args["constant"] for n in plan.init if n.op is LowIROp.UPLOAD_CONSTANT}
        lifted = list(plan.constants.items())[:plan.num_constant_inputs]   # the rest: IREE's inlined ones
        self._constant_shapes = [tuple(v.shape) for _, v in lifted]
        held: dict[tuple, list[tuple[np.ndarray, int]]] = {}
        for j, (name, value) in enumerate(lifted):
            if name in shared:
                self._static[f"in{n_user + j}"] = (shared[name], 0)
                continue
            twin = same_constant(held, value)
            if twin is not None:
                # a tied weight (an embedding and the LM head): one buffer serves both
                shared[name] = twin
                self._static[f"in{n_user + j}"] = (twin, 0)
                continue
            # Filled by the plan's UPLOAD_CONSTANT init nodes (plans saved before those existed: here).
            buf = self._allocate(max(value.nbytes, 4))
            if name not in uploaded:
                self.rt.upload(buf, np.ascontiguousarray(value))
            self._static[f"in{n_user + j}"] = (buf, 0)
            held.setdefault((tuple(value.shape), np.asarray(value).dtype.str), []).append((value, buf))
        # Tuned once the plan's buffers and weights exist: variants read the weights in place.
        with phase("autotune"):
            self.plan = plan = tune_plan(plan, self.rt, resident=self._static)
        # Pipelines of the dispatched entry points only (not the variants tuning passed over).
        used = {n.args["entry_point"] for n in (*plan.init, *plan.main) if n.op is LowIROp.DISPATCH}
        with phase("pipelines"):
            self._kernels = {name: self._kernel(name) for name in plan.executables if name in used}
        self.dynamic = any(d is None for spec in plan.inputs for d in spec.shape)
        if host_expr.contains_expression([n.args for n in plan.init]):
            raise ValueError("a plan's init nodes cannot depend on the input shapes")
        self._init_dispatches = {id(n): self.prepare_dispatch(n) for n in plan.init
                                 if n.op is LowIROp.DISPATCH}
        self._layouts: dict[tuple, _Layout] = {}
        if not self.dynamic:
            self._layout([tuple(spec.shape) for spec in plan.inputs])
        init = [n for n in plan.init
                if not (n.op is LowIROp.UPLOAD_CONSTANT and n.args["constant"] in shared)]
        self._run(init, dict(self._static), self._init_dispatches)
        # Buffers go back to the pool when the compiled graph is dropped (torch._dynamo.reset, GC).
        weakref.finalize(self, free_all, self.rt, self._owned)

    # -- setup --
    def _allocate(self, size: int) -> int:
        # Plan buffers, weights and scratch live as long as the plan: exact sizes, no bucket slack.
        buf = self.rt.allocate(max(int(size), 4), exact=True)
        self._owned.append(buf)
        return buf

    def _layout(self, user_shapes: list[tuple[int, ...]]) -> _Layout:
        """The layout of one input-shape signature (built on first use, kept for the next calls)."""
        key = tuple(user_shapes)
        layout = self._layouts.get(key)
        if layout is None:
            if len(self._layouts) >= self.MAX_LAYOUTS:
                old = self._layouts.pop(next(iter(self._layouts)))
                self.rt.synchronize()   # its buffers may still be read by submitted work
                free_all(self.rt, old.owned)
                for buf in old.owned:
                    self._owned.remove(buf)
            layout = _Layout(self, [*user_shapes, *self._constant_shapes])
            self._owned.extend(layout.owned)
            self._layouts[key] = layout
        return layout

    def _kernel(self, entry: str) -> Any:
        spec = self.plan.executables[entry]
        if self.shader_source == "spirv":
            # Debug/differential path only: IREE's own SPIR-V (no push constants on WebGPU).
            if spec.push_constant_count:
                raise NotImplementedError(f"{entry}: IREE SPIR-V with push constants cannot run on WebGPU")
            # '$' is not a valid identifier for Dawn's SPIR-V reader: rename in place (same length).
            safe = entry.replace("$", "_")
            spirv = self.plan.spirv[entry].replace(entry.encode() + b"\0", safe.encode() + b"\0")
            return self.rt.kernel_from_spirv(spirv, safe, label=entry)
        return self.rt.kernel(self.plan.wgsl[spec.wgsl_file], spec.entry_point, label=entry)

    def _grid(self, entry: str, workgroups: Sequence[int]) -> tuple[Any, tuple[int, ...]]:
        """The kernel and grid of a dispatch: a 1-D grid past the device's per-dimension limit is folded
        into x and y when the shader supports it (mlir_passes/dispatch_grid.py)."""
        workgroups = tuple(int(w) for w in workgroups)
        limit = int(self.rt.info.limits.get("max-compute-workgroups-per-dimension", 65535))
        spec = self.plan.executables[entry]
        folded = shader_grid(workgroups, self.plan.wgsl[spec.wgsl_file], limit)
        if folded is None or self.shader_source != "wgsl":
            return self._kernels[entry], workgroups
        kernel = self.rt.kernel(self.plan.wgsl[spec.wgsl_file], spec.entry_point, label=entry,
                                constants={WORKGROUP_FOLD_OVERRIDE: workgroups[0]})
        return kernel, folded

    def prepare_dispatch(self, node: LowIRNode) -> tuple:
        """Kernel, binding slots, push-constant uniform, read-only slots and grid of a resolved dispatch."""
        spec = self.plan.executables[node.args["entry_point"]]
        host = node.args["bindings"]
        kernel, grid = self._grid(node.args["entry_point"], node.args["workgroups"])
        if self.shader_source == "spirv":
            return kernel, [tuple(b) for b in host], None, frozenset(), grid
        count = max([*spec.binding_map, -1, spec.push_constant_binding or -1]) + 1
        slots: list[Any] = [None] * count
        for wgsl_binding, host_index in spec.binding_map.items():
            slots[wgsl_binding] = tuple(host[host_index])
        uniform = None
        consts = node.args["constants"]
        if spec.push_constant_binding is not None:
            # Push constants (dynamic dims among them) reach the shader through a uniform buffer.
            words = list(consts) + [0] * (-len(consts) % 4 or (4 if not consts else 0))
            uniform = self.rt.constant(struct.pack(f"<{len(words)}I", *words))
        elif consts:
            raise ValueError(f"{spec.entry_point}: host passes {len(consts)} push constants, shader has none")
        missing = [i for i, s in enumerate(slots) if s is None and i != spec.push_constant_binding]
        if missing:
            raise ValueError(f"{spec.entry_point}: WGSL bindings {missing} have no host buffer")
        return kernel, slots, uniform, frozenset(spec.read_only), grid

    def scratch(self, node_key: int, slot: int, nbytes: int) -> int:
        """A plan-owned buffer for a read-only copy of an aliased binding (chosen once per node). Nodes
        share them: one node's copy is used up before the next node's is written (commands run in order),
        so each binding slot needs only buffers as large as its largest copy, not one per node."""
        key = (node_key, slot)
        if key not in self._scratch:
            size = -(-nbytes // 4) * 4
            pool = self._scratch_pool.setdefault(slot, [])
            fits = [(n, buf) for n, buf in pool if n >= size]
            if fits:
                self._scratch[key] = min(fits)[1]
            else:
                pool.append((size, self._allocate(size)))
                self._scratch[key] = pool[-1][1]
        return self._scratch[key]

    # -- calls --
    def _run(self, nodes: Sequence[LowIRNode], buffers: dict[str, tuple[int, int]],
             dispatches: dict[int, tuple]) -> _State:
        state = _State(self, buffers, dispatches)
        for node in nodes:
            SHADER_TO_FUNC[node.op](state, node)
        return state

    def _check_shapes(self, args: Sequence[Any]) -> list[tuple[int, ...]]:
        if len(args) != len(self.plan.inputs):
            raise TypeError(f"compiled graph takes {len(self.plan.inputs)} inputs, got {len(args)}")
        shapes = []
        for k, (t, spec) in enumerate(zip(args, self.plan.inputs, strict=False)):
            if spec.device_dtype == SCALAR:
                shapes.append((int(t),))   # a host scalar: its value is "dimension 0"
                continue
            shape = tuple(t.shape)
            if shape == self._static_shapes[k]:   # static and matching: no per-dimension checks
                shapes.append(shape)
                continue
            shape = tuple(int(d) for d in shape)
            if len(shape) != len(spec.shape) or any(
                    s is not None and s != d for s, d in zip(spec.shape, shape, strict=False)):
                raise ValueError(f"input {k}: shape {list(shape)} differs from the compiled {spec.shape} "
                                 "(None: dynamic; recompile, or use dynamic=False shapes that match)")
            shapes.append(shape)
        return shapes

    def _bind_inputs(self, args: Sequence[Any], layout: _Layout, keep_alive: list[Any],
                     narrowed: list[tuple] | None = None) -> dict[str, tuple[int, int]]:
        """Each input's (buffer id, byte offset): bound zero-copy, copied on the device, or uploaded.

        An int64 webgpu input is narrowed to int32 on the device; given `narrowed`, the narrowing of
        those at a bindable offset is left to the caller (the native program records it): (input,
        buffer id, offset, count) are appended there.

        Device temporaries made here (`.contiguous()` of a view) are appended to `keep_alive`: the
        caller holds them until every node of the call is recorded, since only their buffer id is bound
        and a dropped tensor's id is freed (and its memory reused) at the next allocation.
        """
        buffers = {**self._static, **layout.buffers}
        materialised: dict[int, Any] = {}   # id(view) -> its contiguous copy (one per tensor passed twice)
        align = self._offset_alignment
        for k, (t, spec) in enumerate(zip(args, self.plan.inputs, strict=False)):
            if spec.device_dtype == SCALAR:
                continue
            name = _INPUT_NAMES[k] if k < len(_INPUT_NAMES) else f"in{k}"
            if isinstance(t, DeviceArray):
                if t.dtype != spec.device_dtype:
                    raise TypeError(f"input {k}: a device array of {t.dtype}, the plan takes "
                                    f"{spec.device_dtype}")
                buffers[name] = (t.buffer, t.offset)   # zero-copy: the array stays where it is
                continue
            webgpu = _is_webgpu(t)
            if webgpu and not t.is_contiguous():
                if id(t) not in materialised:
                    materialised[id(t)] = t.contiguous()   # on the device; bound zero-copy below
                    keep_alive.append(materialised[id(t)])
                t = materialised[id(t)]
            is_int64, unchanged = _dtype_facts(t.dtype) if webgpu else (False, None)
            if is_int64 and spec.device_dtype == "int32":
                ptr = t.data_ptr()
                if ptr & 7 == 0 and t.numel():
                    if narrowed is not None and (ptr & 0xFFFFFFFF) % align == 0:
                        narrowed.append((k, ptr >> 32, ptr & 0xFFFFFFFF, t.numel()))
                    else:
                        self._narrow_int64(ptr >> 32, ptr & 0xFFFFFFFF, layout.host_inputs[name][0],
                                           t.numel())
                    buffers[name] = layout.host_inputs[name]
                    continue
            if unchanged == spec.device_dtype:   # bound as it is (another dtype converts via the host)
                ptr = t.data_ptr()
                buf_id, offset = ptr >> 32, ptr & 0xFFFFFFFF
                if offset % align == 0:
                    buffers[name] = (buf_id, offset)   # zero-copy
                    continue
                size = -(-_shape_nbytes(layout.shapes[k], spec.device_dtype) // 4) * 4
                if offset % 4 == 0 and offset + size <= self.rt.buffer(buf_id).nbytes:
                    # A view at an offset the device cannot bind: one on-device copy.
                    self.rt.copy(buf_id, layout.host_inputs[name][0], size, offset, 0)
                    buffers[name] = layout.host_inputs[name]
                    continue
                # Sub-word offsets (views of 1-2 byte dtypes): through the host below.
            if isinstance(t, np.ndarray):
                array = np.ascontiguousarray(t)
            else:
                host = t.detach()
                if webgpu:
                    host = host.cpu()
                array = host.contiguous().numpy()
            if array.dtype == np.int64 and array.size and (
                    array.min() < INT32_MIN or array.max() > INT32_MAX):
                raise OverflowError(f"input {k}: int64 values outside int32 range cannot reach WebGPU "
                                    "shaders (they have no 64-bit integers)")
            array = array.astype(_NP[spec.device_dtype], copy=False)
            self.rt.upload(layout.host_inputs[name][0], array)
            buffers[name] = layout.host_inputs[name]
        return buffers

    def collect_output(self, state: _State, node: LowIRNode) -> None:
        """Record where output `index` is: copied into the readback buffer (host) or a new buffer."""
        a = node.args
        if "input" in a:
            state.results[a["index"]] = ("input", a["input"])
            return
        layout = state.layout
        spec = layout.outputs[a["index"]]
        if _nbytes(spec) != a["size"] and not (_nbytes(spec) == 0 and a["size"] <= 4):
            raise ValueError(f"output {a['index']}: {a['size']} bytes on device, expected {_nbytes(spec)} "
                             f"for {spec.device_dtype}{spec.shape}")
        src, base = state.buffers[a["buffer"]]
        size = -(-a["size"] // 4) * 4
        if a["index"] in getattr(state, "resident", ()):
            buf = self.rt.allocate(max(size, 4))
            if size:
                self.rt.copy(src, buf, size, base + a["offset"], 0)
            state.results[a["index"]] = ("device", DeviceArray(self.rt, buf, spec.shape, spec.device_dtype))
            return
        widen = spec.dtype == "int64" and spec.device_dtype == "int32"
        if state.to_device is not None and (spec.device_dtype == spec.dtype or widen):
            import torch

            out = torch.empty(spec.shape, dtype=getattr(torch, spec.dtype), device=state.to_device)
            ptr = out.data_ptr()
            if widen and out.numel():
                self._widen_int32(src, base + a["offset"], ptr >> 32, ptr & 0xFFFFFFFF, out.numel())
            elif size:
                self.rt.copy(src, ptr >> 32, size, base + a["offset"], ptr & 0xFFFFFFFF)
            state.results[a["index"]] = ("device", out)
        else:
            off = layout.readback_offsets[a["index"]]
            self.rt.copy(src, layout.readback, size, base + a["offset"], off)
            state.results[a["index"]] = ("host", off)

    def narrow_launch(self, src_offset: int, count: int) -> tuple[Any, Any, int, tuple[int, int, int]]:
        """Kernel, uniform, overflow-flag buffer and grid of the int64 -> int32 narrowing of `count`
        values at byte `src_offset` of their binding."""
        rows = -(-count // _WIDEN_WORKGROUP)
        grid_x = min(rows, int(self.rt.info.limits.get("max-compute-workgroups-per-dimension", 65535)))
        params = struct.pack("<4I", count, src_offset // 4, grid_x * _WIDEN_WORKGROUP, 0)
        if self._overflow_flag is None:
            self._narrow_kernel = self.rt.kernel(_NARROW_INT64_WGSL, label="torch-webgpu-narrow-int64")
            self._overflow_flag = self._allocate(4)
            self.rt.fill(self._overflow_flag, 0)
        grid = (grid_x, -(-rows // grid_x), 1)
        return self._narrow_kernel, self.rt.constant(params), self._overflow_flag, grid

    def _narrow_int64(self, src: int, src_offset: int, dst: int, count: int) -> None:
        """`count` int64 of a device buffer at `src_offset` as int32 in `dst` (range checked at next sync)."""
        kernel, params, flag, grid = self.narrow_launch(src_offset, count)
        self.rt.dispatch(kernel, [src, dst, flag, params], grid)
        self.rt.after_wait(self._check_overflow)

    def _check_overflow(self) -> None:
        """Raise OverflowError if a narrowed int64 input held a value outside int32 range."""
        flag = self._overflow_flag
        if flag is not None and self.rt.download_array(flag, np.uint32, 1)[0]:
            self.rt.fill(flag, 0)
            raise OverflowError("a compiled graph's int64 webgpu input had values outside int32 range, "
                                "which WebGPU shaders cannot hold (they have no 64-bit integers); the "
                                "outputs of that call are wrong")

    def _widen_int32(self, src: int, src_offset: int, dst: int, dst_offset: int, count: int) -> None:
        """Sign-extend `count` int32 (IREE's demoted int64) into an int64 device tensor, on the GPU."""
        kernel, grid, params = widen_int32_launch(self, src_offset, dst_offset, count)
        self.rt.dispatch(kernel, [src, dst, self.rt.constant(params)], grid)

    def __call__(self, *args: Any) -> list[Any]:
        """Run the graph once; outputs on the inputs' device (numpy arrays for numpy inputs)."""
        fast = self._fast
        if fast is not None:
            results = fast(args)
            if results is not None:
                return results
        keep_alive: list[Any] = []   # device temporaries bound by id: alive until the call is recorded
        with self.rt.lock:
            layout = self._layout(self._check_shapes(args))
            narrowed: list[tuple] | None = [] if self._native_allowed() else None
            buffers = self._bind_inputs(args, layout, keep_alive, narrowed)
            state = _State(self, buffers, layout.dispatches)
            state.layout = layout
            state.results = {}
            state.to_device = next((t.device for t in args if _is_webgpu(t)), None)
            narrowed = narrowed or []
            native = self._native(layout, state.to_device is not None, tuple(n[0] for n in narrowed))
            if native is not None and native.writes_inputs and not _distinct_inputs(native, buffers):
                native = None   # inputs that share a buffer, one of them written: aliasing, per call
            check = native is not None and self.check_native and not native.checked
            # A program that writes its inputs: keep their bytes, so the reference run starts from them.
            before = (self._snapshot_inputs(native, layout, buffers) if check and native.writes_inputs
                      else None)
            if native is not None:
                self._record_native(native, state, buffers, narrowed)
            else:
                for k, buf, offset, count in narrowed:
                    self._narrow_int64(buf, offset, layout.host_inputs[f"in{k}"][0], count)
                for node in layout.main:
                    SHADER_TO_FUNC[node.op](state, node)
            outputs = self._finish(state, args, _numpy_mode(args))
            if check:
                # TORCH_WEBGPU_EXECUTOR=check: the first call of every native program is re-run by the
                # Python executor (the reference) and must give the same bits, inputs it writes included
                # (restored to their bytes before the native run first).
                written = None
                if before is not None:
                    written = self._snapshot_inputs(native, layout, buffers)
                    self._restore_inputs(native, buffers, before)
                reference = _State(self, buffers, layout.dispatches)
                reference.layout, reference.results, reference.to_device = layout, {}, state.to_device
                for node in layout.main:
                    SHADER_TO_FUNC[node.op](reference, node)
                what = self.plan.meta.get("name", "plan")
                assert_same_outputs(outputs, self._finish(reference, args, _numpy_mode(args)), what)
                if written is not None:
                    now = self._snapshot_inputs(native, layout, buffers)
                    assert_same_outputs([self._read(b) for b, _ in written], [self._read(b) for b, _ in now],
                                        f"{what} (inputs it writes)")
                    for buf, _ in (*before, *written, *now):
                        self.rt.free(buf)
                mark_checked(native)
            del keep_alive   # every use is recorded: freeing now is ordered after them
            if fast is None and native is not None:
                self._fast = FastCall.build(self, layout, native, args, tuple(n[0] for n in narrowed))
        self.calls += 1
        return [graph_output(i, outputs, args) for i in self.plan.output_map]

    def run_resident(self, args: Sequence[Any], resident: Sequence[int] = ()) -> list[Any]:
        """Run the graph once without torch: inputs are numpy arrays or DeviceArrays (bound zero-copy),
        the plan outputs numbered in `resident` stay on the device as DeviceArrays, the others come back
        as numpy arrays (the only readback). When every output stays on the device the native executor
        records the call (where it covers the plan), else the Python executor."""
        with self.rt.lock:
            layout = self._layout(self._check_shapes(args))
            buffers = self._bind_inputs(args, layout, [])
            resident = frozenset(resident)
            native = None
            if self._native_allowed() and resident >= set(range(len(layout.outputs))) and all(
                    o.dtype == o.device_dtype for o in layout.outputs):
                native = self._native(layout, True, ())
                if native is not None and native.writes_inputs:
                    native = None   # aliasing between inputs is the Python executor's to handle
            state = self._resident_state(layout, buffers, resident)
            if native is not None:
                self._record_native_resident(native, state, buffers)
            else:
                for node in layout.main:
                    SHADER_TO_FUNC[node.op](state, node)
            outputs = self._finish(state, args, numpy_mode=True)
            if native is not None and self.check_native and not native.checked:
                # TORCH_WEBGPU_EXECUTOR=check: the Python executor's run must give the same bits
                reference = self._resident_state(layout, buffers, resident)
                for node in layout.main:
                    SHADER_TO_FUNC[node.op](reference, node)
                again = self._finish(reference, args, numpy_mode=True)
                what = self.plan.meta.get("name", "plan")
                assert_same_outputs([o.numpy() for o in outputs], [o.numpy() for o in again], what)
                for o in again:
                    o.release()
                mark_checked(native)
        self.calls += 1
        return [graph_output(i, outputs, args) for i in self.plan.output_map]

    def _resident_state(self, layout: _Layout, buffers: dict[str, tuple[int, int]],
                        resident: frozenset[int]) -> _State:
        state = _State(self, buffers, layout.dispatches)
        state.layout, state.results, state.to_device, state.resident = layout, {}, None, resident
        return state

    def _native_input_slots(self, native: NativeLayout, buffers: dict[str, tuple[int, int]]) -> list[int]:
        """(GPU buffer handle, byte offset) of each of the native program's input slots, flattened."""
        slots: list[int] = []
        for k in native.input_slots:
            buf_id, base = buffers[f"in{k}"]
            slots += (buffer_handle(self.rt.pool.get(buf_id)), base)
        return slots

    def _record_native_resident(self, native: NativeLayout, state: _State,
                                buffers: dict[str, tuple[int, int]]) -> None:
        """One call through the native program with its device outputs in new runtime buffers."""
        pool = self.rt.pool
        slots = self._native_input_slots(native, buffers)
        results = dict(native.results)
        for i in native.output_slots:
            spec = state.layout.outputs[i]
            out = DeviceArray(self.rt, self.rt.allocate(max(_nbytes(spec), 4)), spec.shape, spec.device_dtype)
            slots += (buffer_handle(pool.get(out.buffer)), 0)
            results[i] = ("device", out)
        state.results = results
        native.program.record(tuple(slots), submit=not native.reads_back)

    def _snapshot_inputs(self, native: NativeLayout, layout: _Layout,
                         buffers: dict[str, tuple[int, int]]) -> list[tuple[int, int]]:
        """(copy's buffer id, size) of the bytes of each input the native program binds (check mode)."""
        copies = []
        for k in native.input_slots:
            buf_id, base = buffers[f"in{k}"]
            size = -(-_shape_nbytes(layout.shapes[k], self.plan.inputs[k].device_dtype) // 4) * 4
            copy = self.rt.allocate(max(size, 4))
            if size:
                self.rt.copy(buf_id, copy, size, base, 0)
            copies.append((copy, size))
        return copies

    def _restore_inputs(self, native: NativeLayout, buffers: dict[str, tuple[int, int]],
                        copies: list[tuple[int, int]]) -> None:
        for k, (copy, size) in zip(native.input_slots, copies, strict=True):
            buf_id, base = buffers[f"in{k}"]
            if size:
                self.rt.copy(copy, buf_id, size, 0, base)

    def _read(self, buffer_id: int) -> np.ndarray:
        return np.frombuffer(self.rt.download(buffer_id), dtype=np.uint8)

    def _native_allowed(self) -> bool:
        return self.executor == "native" and not self.rt.profiling

    def _native(self, layout: _Layout, device_outputs: bool,
                narrowed: tuple[int, ...]) -> NativeLayout | None:
        """The layout's native program for this output mode and these device-narrowed int64 inputs, or
        None where the Python executor runs (TORCH_WEBGPU_EXECUTOR=python, no native extension, a
        profiled call, or nodes it does not cover)."""
        if not self._native_allowed():
            return None
        key = (device_outputs, narrowed)
        if key not in layout.native:
            try:
                layout.native[key] = build_native_layout(self, layout, device_outputs, narrowed)
            except NativeUnsupported as exc:
                layout.native[key] = None
                self.native_unsupported = str(exc)
        return layout.native[key]

    def _record_native(self, native: NativeLayout, state: _State, buffers: dict[str, tuple[int, int]],
                       narrowed: list[tuple]) -> None:
        """One call through the native program: per-call buffers into its slots, then record it."""
        pool = self.rt.pool
        slots = self._native_input_slots(native, buffers)
        results = dict(native.results)
        if native.output_slots:
            import torch

            layout = state.layout
            for i in native.output_slots:
                spec = layout.outputs[i]
                out = torch.empty(spec.shape, dtype=getattr(torch, spec.dtype), device=state.to_device)
                ptr = out.data_ptr()
                # A fresh storage starts at offset 0; an empty one has no buffer (and no command uses it).
                slots += (buffer_handle(pool.get(ptr >> 32 or layout.readback)), 0)
                results[i] = ("device", out)
        for _, buf_id, offset, _ in narrowed:   # the int64 sources narrowed by the program's first dispatches
            slots += (buffer_handle(pool.get(buf_id)), offset)
        state.results = results
        # Outputs that stay on the device: C++ also submits (nothing to read back, no wait).
        native.program.record(tuple(slots), submit=not native.reads_back)
        if narrowed:
            self.rt.after_wait(self._check_overflow)

    def _finish(self, state: Any, args: Sequence[Any], numpy_mode: bool = False) -> list[Any]:
        layout = state.layout
        host_outputs = [i for i, r in state.results.items() if r[0] == "host"]
        raw = b""
        if host_outputs:
            end = max(layout.readback_offsets[i] + _nbytes(layout.outputs[i]) for i in host_outputs)
            raw = self.rt.download(layout.readback, 0, -(-end // 4) * 4)   # the call's only submit
        else:
            self.rt.flush()
        outputs = []
        for i, spec in enumerate(layout.outputs):
            kind, where = state.results[i]
            if kind == "input":
                outputs.append(args[where])
            elif kind == "host":
                n = math.prod(int(d) for d in spec.shape)
                array = np.frombuffer(raw, dtype=_NP[spec.device_dtype], count=n, offset=where)
                array = array.copy().reshape(spec.shape)
                if numpy_mode:
                    outputs.append(array.astype(np.dtype(spec.dtype), copy=False))
                    continue
                import torch

                out = torch.from_numpy(array).to(getattr(torch, spec.dtype))
                # Demoted dtypes (int64, float64) come back through the host to the inputs' device.
                outputs.append(out if state.to_device is None else out.to(state.to_device))
            else:
                outputs.append(where)
        return outputs

    def release(self) -> None:
        """Give the plan's buffers back to the runtime pool."""
        free_all(self.rt, self._owned)


TIED_MIN_BYTES = 1 << 16   # smaller constants are not worth comparing


def same_constant(held: dict[tuple, list[tuple[Any, Any]]], value: Any) -> Any:
    """What `held` ((shape, dtype) -> [(array, handle)]) keeps for an array bit-identical to `value`
    (a tied weight), or None; compares a few bytes first, so distinct weights cost almost nothing."""
    value = np.ascontiguousarray(value)
    if value.nbytes < TIED_MIN_BYTES:
        return None
    raw = value.reshape(-1).view(np.uint8)
    for other, handle in held.get((tuple(value.shape), value.dtype.str), ()):
        other_raw = np.ascontiguousarray(other).reshape(-1).view(np.uint8)
        if bytes(other_raw[:64]) == bytes(raw[:64]) and np.array_equal(other_raw, raw):
            return handle
    return None


def _distinct_inputs(native: NativeLayout, buffers: dict[str, tuple[int, int]]) -> bool:
    """True when the program's input slots are bound to different buffers this call."""
    ids = [buffers[f"in{k}"][0] for k in native.input_slots]
    return len(set(ids)) == len(ids)


def widen_int32_launch(compiled: CompiledPlan, src_offset: int, dst_offset: int,
                       count: int) -> tuple[Any, tuple[int, int, int], bytes]:
    """Kernel, grid and uniform bytes that sign-extend `count` int32 at `src_offset` into int64."""
    if src_offset % 4 or dst_offset % 8:
        raise ValueError("int64 output widening needs 4-byte aligned source and 8-byte aligned target")
    rows = -(-count // _WIDEN_WORKGROUP)
    grid_x = min(rows, int(compiled.rt.info.limits.get("max-compute-workgroups-per-dimension", 65535)))
    params = struct.pack("<4I", count, src_offset // 4, dst_offset // 4, grid_x * _WIDEN_WORKGROUP)
    kernel = compiled.rt.kernel(_WIDEN_INT32_WGSL, label="torch-webgpu-widen-int32")
    return kernel, (grid_x, -(-rows // grid_x), 1), params


def free_all(rt: Any, owned: list[int]) -> None:
    """Free every buffer id in `owned` (ignoring a lost device) and empty the list."""
    for buf in owned:
        try:
            rt.free(buf)
        except Exception:  # device lost or interpreter shutting down: nothing left to free
            pass
    owned.clear()


def lowering(plan: Plan, rt: Any = None, shader_source: str = "wgsl",
             constant_buffers: Mapping[str, int] | None = None,
             slot_buffers: Mapping[str, int] | None = None) -> CompiledPlan:
    """The callable that runs `plan` on the runtime (one command buffer per call); `constant_buffers`:
    buffer ids of lifted constants already uploaded (shared with another plan), by constant name;
    `slot_buffers`: buffers for the plan's memory slots (plan_memory.shared_slot_sizes), shared by plans
    whose calls never overlap (the phases of one decode bundle); the caller owns them."""
    return CompiledPlan(plan, rt, shader_source, constant_buffers, slot_buffers)
