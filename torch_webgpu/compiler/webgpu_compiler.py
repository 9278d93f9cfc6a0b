"""torch.compile backend `webgpu`: FX -> torch-mlir -> high passes -> IREE (WebGPU SPIR-V) -> WGSL -> plan.

Forward and backward graphs go through AOTAutograd, so training works. Each graph is compiled once per
process (and once per machine thanks to the disk cache) and runs as one command buffer per call.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from torch_webgpu.config import DUMP_DIR
from torch_webgpu.plan import phases
from torch_webgpu.plan.compiled import lowering
from torch_webgpu.plan.dtypes import INT32_MAX, INT32_MIN, SCALAR, device_dtype
from torch_webgpu.plan.format import ExecutableSpec, LowIROp, Plan, TensorSpec
from torch_webgpu.plan.phases import phase

from . import cache
from .fx_import import PreparedGraph, import_graph, import_graphs, prepare_graph
from .high_ir import build_high_ir

log = logging.getLogger(__name__)


@dataclass
class CompileStats:
    """What the last compilations did (for tests and reports)."""

    graphs: int = 0
    cache_hits: int = 0
    iree_calls: int = 0
    seconds: list[float] = field(default_factory=list)
    plans: list[Plan] = field(default_factory=list)    # the last few plans (newest last)


STATS = CompileStats()


def _target():
    from mlir_passes.webgpu_target import WebGPUTarget
    from torch_webgpu.runtime import get_runtime

    info = get_runtime().info
    return WebGPUTarget.from_limits(info.limits, info.features, getattr(info, "subgroup_matrix_configs", ()))


class _Dumper:
    """Writes per-graph artifacts under TORCH_WEBGPU_DUMP_DIR (nothing when unset)."""

    _counter = 0

    def __init__(self) -> None:
        root = DUMP_DIR.read()
        self.dir: Path | None = None
        if root:
            _Dumper._counter += 1
            self.dir = root / f"graph_{os.getpid()}_{_Dumper._counter:03d}"
            self.dir.mkdir(parents=True, exist_ok=True)

    def write(self, name: str, text: str) -> None:
        if self.dir is not None:
            (self.dir / name).write_text(text)

    def pass_dump(self, pass_name: str, text: str) -> None:
        self.write(f"torch.after-{pass_name}.mlir", text)


def translate_executables(spirv_mlir: dict[str, str]) -> tuple[dict[str, ExecutableSpec], dict[str, str]]:
    """WGSL for every entry point, through the SPIR-V -> WGSL translator (mlir_passes/spirv_to_wgsl)."""
    try:
        from mlir_passes.spirv_to_wgsl import translate_spirv_module
    except ImportError as exc:
        raise NotImplementedError(
            "the SPIR-V -> WGSL translator (mlir_passes.spirv_to_wgsl.translate_spirv_module) is not "
            f"available yet ({exc}); torch.compile(backend='webgpu') cannot generate shaders") from exc
    specs: dict[str, ExecutableSpec] = {}
    sources: dict[str, str] = {}
    done: set[str] = set()
    for _entry, text in spirv_mlir.items():
        if text in done:
            continue
        done.add(text)
        for exe in translate_spirv_module(text, push_constants=None):
            file = f"{exe.entry_point}.wgsl"
            binding_map = {}
            for b in exe.bindings:
                if b.set != 0:
                    raise NotImplementedError(f"{exe.entry_point}: descriptor set {b.set} (IREE uses set 0)")
                binding_map[int(b.wgsl_binding)] = int(b.binding)
            specs[exe.name] = ExecutableSpec(
                entry_point=exe.entry_point, wgsl_file=file, workgroup_size=list(exe.workgroup_size),
                binding_map=binding_map, push_constant_binding=exe.push_constant_binding,
                push_constant_count=int(exe.push_constant_count or 0),
                read_only=sorted(int(b.wgsl_binding) for b in exe.bindings if b.access == "read"))
            sources[file] = exe.code
    missing = set(spirv_mlir) - set(specs)
    if missing:
        raise ValueError(f"the translator returned no WGSL for entry points {sorted(missing)}")
    return specs, sources


def _spec(value: Any) -> TensorSpec:
    """Shape (None for a symbolic dim, dynamic=True) and dtypes of a graph input or output; a symbolic
    int input is a host scalar: shape [None], device dtype `index`."""
    if isinstance(value, torch.SymInt):
        return TensorSpec([None], "int64", SCALAR)
    if not isinstance(value, torch.Tensor):
        raise NotImplementedError(f"graph value {value!r} is not a tensor; the WebGPU backend returns "
                                  "tensors only (return sizes as tensors, or compute them outside)")
    shape = [int(d) if isinstance(d, int) else None for d in value.shape]
    return TensorSpec(shape, str(value.dtype).removeprefix("torch."), device_dtype(value.dtype))


def _constant_array(t: torch.Tensor, name: str) -> np.ndarray:
    array = t.detach().cpu().contiguous().numpy()
    if t.dtype == torch.int64:
        if array.size and (array.min() < INT32_MIN or array.max() > INT32_MAX):
            raise OverflowError(f"constant {name}: int64 values outside int32 range (WebGPU has no int64)")
        return array.astype(np.int32)
    if t.dtype == torch.float64:
        return array.astype(np.float32)
    return array


def _has_float16(prepared: PreparedGraph, example_inputs: list[Any]) -> bool:
    """Whether any input, weight or intermediate value of the graph is float16."""
    from .operands import value_of

    values = [*example_inputs, *prepared.constants,
              *(value_of(n) for n in prepared.graph_module.graph.nodes)]
    return any(isinstance(v, torch.Tensor) and v.dtype == torch.float16 for v in values)


def compile_plan(prepared: PreparedGraph, example_inputs: list[Any], target: Any = None) -> Plan:
    """Compile one prepared FX graph into a Plan (through the disk cache); `target`: a WebGPUTarget
    (default: this adapter's limits and features)."""
    from mlir_passes.torch_passes import run_high_passes

    start = time.perf_counter()
    dumper = _Dumper()
    with phase("torch-mlir import"):
        module = import_graph(prepared.graph_module)
    dumper.write("torch.imported.mlir", str(module))
    with phase("high passes"):
        build_high_ir(module).check_supported(only_unregistered=True)
        run_high_passes(module, dumper.pass_dump)
        high = build_high_ir(module)
        dumper.write("high_ir.txt", str(high))
        high.check_supported()
        torch_text = str(module)
    target = target or _target()
    if not target.shader_f16 and _has_float16(prepared, example_inputs):
        # (IREE would emulate f16 storage in 32-bit words and fail on the vector bitcasts that needs.)
        raise TypeError("float16 graphs need the WebGPU feature 'shader-f16', which the target lacks (for a "
                        "bundle: a target with shader-f16 and f16 enabled, e.g. `--f16`); "
                        "or use float32 (model.float())")
    constants = {f"_const_{i}": _constant_array(t, f"_const_{i}") for i, t in enumerate(prepared.constants)}
    digest = hashlib.sha256()
    for name, value in constants.items():
        digest.update(name.encode() + str(value.dtype).encode() + value.tobytes())
    from .families.grouped import grouping_enabled
    from .library_plan import library_enabled

    # Plans with library dispatches and all-IREE plans (TORCH_WEBGPU_LIBRARY=0) are cached apart, and
    # so are plans without grouped sibling linears (TORCH_WEBGPU_GROUPED_GEMV=0).
    mode = ("|library" if library_enabled() else "") + ("" if grouping_enabled() else "|ungrouped")
    key = cache.cache_key(torch_text, target.key() + mode, digest.digest())
    STATS.graphs += 1
    with phase("cache"):
        plan = cache.load(key)
    if plan is not None:
        STATS.cache_hits += 1
    else:
        plan = _compile_uncached(prepared, example_inputs, torch_text, target, constants, dumper)
        with phase("cache"):
            cache.store(key, plan)
    if dumper.dir is not None:
        dumper.write("plan.txt", str(plan))
        plan.save(dumper.dir / "plan")
        for name, source in plan.wgsl.items():
            dumper.write(name, source)
    STATS.seconds.append(time.perf_counter() - start)
    STATS.plans = [*STATS.plans[-7:], plan]
    return plan


def _compile_uncached(prepared: PreparedGraph, example_inputs: list[Any], torch_text: str, target: Any,
                      constants: dict[str, np.ndarray], dumper: _Dumper) -> Plan:
    from .library_plan import compile_partitioned, plan_partition
    from .operands import value_of

    inputs = [_spec(v) for v in example_inputs] + [
        TensorSpec(list(v.shape), str(v.dtype), str(v.dtype)) for v in constants.values()]
    outputs = [_spec(v) for v in prepared.output_vals]
    with phase("partition"):
        part = plan_partition(prepared, example_inputs, target)
    if part is None:
        plan = _iree_plan(torch_text, "main", target, inputs, outputs, prepared.output_map, constants, dumper)
        dumper.write("dispatches.txt", "".join(f"iree\t{n.args['entry_point']}\n" for n in plan.main
                                               if n.op is LowIROp.DISPATCH))
        return plan

    def compile_segments(segments: list) -> list[Plan]:
        from mlir_passes.torch_passes import run_high_passes

        with phase("torch-mlir import"):
            module = import_graphs([(gm, name) for gm, name, _ in segments])
        with phase("high passes"):
            run_high_passes(module)   # the whole graph's ops were checked by compile_plan
        specs = [([_spec(value_of(n)) for n in gm.graph.nodes if n.op == "placeholder"],
                  [_spec(v) for v in output_vals]) for gm, _, output_vals in segments]
        return _iree_plans(str(module), [name for _, name, _ in segments], target, specs, dumper)

    plan, listing = compile_partitioned(prepared, part, inputs[:len(example_inputs)], outputs, constants,
                                        target, compile_segments)
    dumper.write("dispatches.txt", listing)
    return plan


_NARROW_INT = re.compile(r"vtensor<\[[^\]]*\],(si8|ui8|si16|ui16)>")


def refuse_narrow_ints(torch_text: str) -> None:
    """NotImplementedError when IREE would compile 8/16-bit integer tensors: on a target without 8/16-bit
    storage (WebGPU) it keeps one i32 per element while its host program sizes those buffers one byte
    per element, which gives wrong results (torchao int8/int4 weights run in the quant_matmul and
    quant_embedding library kernels instead; a pattern those do not match ends here)."""
    found = _NARROW_INT.search(torch_text)
    if found:
        raise NotImplementedError(
            f"an {found.group(1)} tensor reaches IREE, which computes wrong results for 8/16-bit integer "
            "tensors on WebGPU; convert it to int32 in the model, or (torchao weights) use a pattern the "
            "quantized library kernels match (dequantize_affine + linear or + embedding, static shapes, "
            "TORCH_WEBGPU_LIBRARY=1)")


def _iree_plans(torch_text: str, func_names: list[str], target: Any,
                specs: list[tuple[list[TensorSpec], list[TensorSpec]]], dumper: _Dumper) -> list[Plan]:
    """One plan per function of a torch-dialect module compiled by IREE in one invocation; `specs`:
    (inputs, outputs) of each function. The first plan holds the shared initializers and constants."""
    from mlir_passes.host_program import extract_host_programs
    from mlir_passes.iree_driver import compile_to_hal, with_target

    from .plan_builder import build_plan

    dumper.write("iree_input.mlir", with_target(torch_text, target))
    refuse_narrow_ints(torch_text)
    STATS.iree_calls += 1
    with phase("iree compile"):
        artifacts = compile_to_hal(torch_text, target)
    dumper.write("iree_hal.mlir", artifacts.hal_text)
    for entry, text in artifacts.spirv_mlir.items():
        dumper.write(f"{entry.replace('$', '_')}.spirv.mlir", text)
    with phase("host program"):
        hosts = extract_host_programs(artifacts.hal_text, [f"{name}$async" for name in func_names])
    with phase("spirv to wgsl"):
        executables, sources = translate_executables(artifacts.spirv_mlir)
    plans = []
    with phase("plan build"):
        for host, (inputs, outputs) in zip(hosts, specs, strict=True):
            plan = build_plan(host, executables, sources, inputs, outputs, list(range(len(outputs))), {})
            plan.spirv = dict(artifacts.spirv_binaries)
            plans.append(plan)
    return plans


def _iree_plan(torch_text: str, func_name: str, target: Any, inputs: list[TensorSpec],
               outputs: list[TensorSpec], output_map: list, constants: dict[str, np.ndarray],
               dumper: _Dumper) -> Plan:
    """The plan of one torch-dialect function compiled by IREE (`inputs` include the lifted constants)."""
    from mlir_passes.host_program import extract_host_program
    from mlir_passes.iree_driver import IREECompileError, compile_to_hal, with_target

    from .plan_builder import build_plan, copy_written_inputs

    tag = "" if func_name == "main" else f"{func_name}."
    dumper.write(f"{tag}iree_input.mlir", with_target(torch_text, target))
    refuse_narrow_ints(torch_text)
    STATS.iree_calls += 1
    try:
        with phase("iree compile"):
            artifacts = compile_to_hal(torch_text, target)
    except IREECompileError as exc:
        if "[?" in torch_text or ",?" in torch_text:
            raise IREECompileError(f"{exc}\n(the graph has dynamic dims from torch.compile(dynamic=True); "
                                   "IREE may compile it with static shapes: use dynamic=False)") from exc
        raise
    dumper.write(f"{tag}iree_hal.mlir", artifacts.hal_text)
    for entry, text in artifacts.spirv_mlir.items():
        dumper.write(f"{entry.replace('$', '_')}.spirv.mlir", text)
    with phase("host program"):
        host = extract_host_program(artifacts.hal_text, function=f"{func_name}$async")
    with phase("spirv to wgsl"):
        specs, sources = translate_executables(artifacts.spirv_mlir)
    with phase("plan build"):
        plan = copy_written_inputs(build_plan(host, specs, sources, inputs, outputs, output_map, constants))
    plan.spirv = dict(artifacts.spirv_binaries)
    plan.meta = {"target": target.key(), "dispatches": plan.dispatch_count}
    return plan


def _compile_graph(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    from torch._functorch.aot_autograd import make_boxed_func
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    # AOTAutograd calls compilers under fake mode; constants and buffers here are real tensors.
    with unset_fake_temporarily(), phase("backend"):
        with phase("prepare graph"):
            prepared = prepare_graph(gm, list(example_inputs))
        plan = compile_plan(prepared, [example_inputs[k] for k in prepared.kept_inputs])
        with phase("lowering"):
            compiled = lowering(plan)
    phases.log_phases(f"graph {STATS.graphs}", dict(phases.SECONDS))
    kept = prepared.kept_inputs
    all_kept = kept == list(range(len(example_inputs)))

    def run(*args: torch.Tensor) -> list:
        return compiled(*args) if all_kept else compiled(*[args[k] for k in kept])

    run.plan = plan  # type: ignore[attr-defined]
    run.compiled = compiled  # type: ignore[attr-defined]
    return make_boxed_func(run)


def _sdpa_math(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
               enable_gqa=False):
    """SDPA as plain ops (the math reference): autograd then differentiates matmuls and softmax
    instead of keeping the CPU flash-attention kernel and its backward, which IREE cannot compile."""
    return torch.ops.aten._scaled_dot_product_attention_math(
        query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)[0]


def _sdpa_explicit(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                         enable_gqa=False):
    """SDPA in explicit ops, for an attention mask or symbolic sizes: with either, ATen's math kernel as
    decomposed here gave wrong results (transformers' GPT-2 without KV cache, static or dynamic=True)."""
    if enable_gqa and key.shape[-3] != query.shape[-3]:
        repeat = query.shape[-3] // key.shape[-3]
        key, value = key.repeat_interleave(repeat, -3), value.repeat_interleave(repeat, -3)
    scores = (query @ key.transpose(-2, -1)) * (query.shape[-1] ** -0.5 if scale is None else scale)
    if is_causal:
        n, m = query.shape[-2], key.shape[-2]
        causal = torch.ones(n, m, dtype=torch.bool, device=query.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
    if attn_mask is not None:
        scores = (scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool
                  else scores + attn_mask)
    return torch.ops.aten._safe_softmax(scores, -1) @ value   # fully masked rows give 0, as ATen's


def _decompose_attention(gm: torch.fx.GraphModule, symbolic: bool = False) -> None:
    """Route scaled_dot_product_attention through its math form (before AOTAutograd sees it);
    `symbolic`: the graph has symbolic sizes."""
    changed = False
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is torch._C._nn.scaled_dot_product_attention:
            dropout = node.args[4] if len(node.args) > 4 else node.kwargs.get("dropout_p", 0.0)
            if dropout == 0.0:
                mask = node.kwargs.get("attn_mask", node.args[3] if len(node.args) > 3 else None)
                node.target = _sdpa_explicit if symbolic or mask is not None else _sdpa_math
                changed = True
    if changed:
        gm.recompile()


def webgpu_backend(gm: torch.fx.GraphModule, example_inputs: list[Any], **kwargs: Any) -> Any:
    """torch.compile backend: forward and backward graphs compiled for WebGPU through AOTAutograd."""
    from torch._dynamo.backends.common import aot_autograd

    from .decompositions import decomposition_table

    symbolic = any(isinstance(v, torch.SymInt) for x in example_inputs if isinstance(x, torch.Tensor)
                   for v in x.shape) or any(isinstance(x, torch.SymInt) for x in example_inputs)
    _decompose_attention(gm, symbolic)
    backend = aot_autograd(fw_compiler=_compile_graph, bw_compiler=_compile_graph,
                           decompositions=decomposition_table())
    if not symbolic or not torch._dynamo.config.assume_static_by_default:
        # dynamic=True: one plan whose sizes, workgroup counts and push constants are expressions of the
        # inputs' dimensions, evaluated per input-shape signature; the dims reach shaders as uniforms.
        return backend(gm, example_inputs, **kwargs)
    return _specialize_per_shape(gm, backend)


def _specialize_per_shape(gm: torch.fx.GraphModule, backend: Any) -> Any:
    """Dynamo made the graph dynamic after a shape change: compile one static plan per concrete shape."""
    compiled: dict[tuple, Any] = {}

    def run(*args: Any) -> Any:
        key = tuple((tuple(a.shape), a.dtype, a.device.type) if isinstance(a, torch.Tensor) else a
                    for a in args)
        fn = compiled.get(key)
        if fn is None:
            fn = compiled[key] = backend(gm, list(args))
        return fn(*args)

    return run


def _register() -> None:
    from torch._dynamo import list_backends, register_backend

    if "webgpu" not in list_backends(exclude_tags=()):
        register_backend(name="webgpu")(webgpu_backend)


_register()
