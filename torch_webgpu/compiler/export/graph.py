"""`export(model, example_inputs, path)`: torch.export -> the compiler's plan -> a bundle on disk.

Parameters and buffers are baked into the bundle (constants.safetensors): the bundle takes only the
model's inputs. Each phase is a function of its own so the CLI can stop after any of them.
"""

from __future__ import annotations

import contextlib
import json
import operator
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from torch_webgpu.bundle.format import BUNDLE_FORMAT, BUNDLE_FORMAT_VERSION, write_bundle
from torch_webgpu.bundle.requirements import (
    check_requirements,
    plan_requirements,
    target_limits,
    target_subgroup_matrix_configs,
)
from torch_webgpu.config import DUMP_DIR, overridden

PHASES = ("high-ir", "iree-input", "wgsl", "bundle")


@dataclass
class TracedModel:
    """A model as one stateless FX graph with its weights as attributes (from torch.export)."""

    graph_module: torch.fx.GraphModule
    example_inputs: list[torch.Tensor]
    input_names: list[str]
    output_structure: str          # "single": the model returns one tensor; "sequence": a flat tuple
    # The model's name (state-dict key) of each weight attribute of `graph_module`.
    weight_names: dict[str, str] = field(default_factory=dict)


@dataclass
class Target:
    """A named target profile and the IREE target built from its limits."""

    name: str
    limits: dict[str, int]
    features: frozenset[str]
    f16: bool
    iree: Any   # mlir_passes.webgpu_target.WebGPUTarget


def make_target(name: str = "auto", f16: bool = False) -> Target:
    """The target profile `name` (`auto`, `webgpu-core` or a JSON file of an adapter's limits and features,
    as `torch-webgpu adapter --json` prints); f16 needs the profile's shader-f16."""
    from mlir_passes.webgpu_target import WebGPUTarget

    limits, features = target_limits(name)
    if f16 and "shader-f16" not in features:
        where = "this adapter" if name == "auto" else f"target {name}"
        hint = "" if name == "auto" else " or use --target auto"
        raise ValueError(f"--f16 needs the WebGPU feature 'shader-f16', which {where} does not offer; "
                         f"compile in float32 (drop --f16){hint}")
    # f16 code only when asked: a float32 model on an f16-capable adapter stays portable.
    # Subgroup matrices only serve f16 matmuls: f32 targets (and their cache keys) stay without them.
    configs = target_subgroup_matrix_configs(name) if f16 else ()
    iree = WebGPUTarget.from_limits(limits, features if f16 else features - {"shader-f16"}, configs)
    return Target(name, limits, frozenset(features), f16, iree)


def _decompositions() -> dict:
    from torch.export.exported_program import default_decompositions
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table

    table = dict(get_decomposition_table())
    # torch-mlir's table holds the custom ops' (CompositeImplicit) decompositions registered when it was
    # first built: ops of a library imported later (torchao's dequantize_affine after an earlier export)
    # would stay undecomposed, so add them from torch's table as it is now.
    for op, fn in default_decompositions().items():
        if getattr(op, "namespace", "aten") != "aten":
            table.setdefault(op, fn)
    return table


def trace(model: Any, example_inputs: Sequence[Any], f16: bool = False) -> TracedModel:
    """torch.export an nn.Module (eval mode, no grad) or take an ExportedProgram; decompose for the
    compiler; weights become graph attributes."""
    inputs = [x if isinstance(x, torch.Tensor) else torch.as_tensor(x) for x in example_inputs]
    if isinstance(model, torch.export.ExportedProgram):
        if f16:
            raise ValueError("--f16 converts a Python model; an exported program (.pt2) keeps its dtypes: "
                             "export it in float16 instead")
        program = model
    elif isinstance(model, torch.nn.Module):
        if f16:
            import copy

            model = copy.deepcopy(model).half()
            inputs = [x.half() if x.is_floating_point() else x for x in inputs]
        was_training = model.training
        model.eval()   # a bundle is for inference: dropout off, BatchNorm on its running statistics
        try:
            with torch.no_grad():
                program = torch.export.export(model, tuple(inputs))
        finally:
            model.train(was_training)
    else:
        raise TypeError(f"export takes an nn.Module or a torch.export.ExportedProgram, not {type(model)}")
    program = program.run_decompositions(_decompositions())
    gm = program.module()
    weight_names = {}
    for node in list(gm.graph.nodes):
        # torch.export's input guards (a call_module) check shapes in Python; a bundle checks them itself.
        if node.op == "call_module" and node.target == "_guards_fn":
            gm.graph.erase_node(node)
        elif node.op == "call_function" and node.target is torch.ops.aten._assert_tensor_metadata.default:
            # torch.export's dtype checks of `.to()` (no output): as extra users of a value they would
            # hide fusable chains from the compiler's matchers (softmax(scores.float()).to(f16))
            gm.graph.erase_node(node)
        elif node.op == "get_attr" and "." in node.target:
            # Weights and buffers of submodules become top-level attributes (constants of the plan).
            value = operator.attrgetter(node.target)(gm)
            name = "_w_" + node.target.replace(".", "_")
            setattr(gm, name, value.detach() if isinstance(value, torch.Tensor) else value)
            if node.target in program.state_dict:   # non-persistent buffers stay in the bundle
                weight_names[name] = node.target
            node.target = name
    gm.graph.lint()
    gm.recompile()
    names = [s.arg.name for s in program.graph_signature.input_specs
             if s.kind == torch.export.graph_signature.InputKind.USER_INPUT]
    out_spec = program.call_spec.out_spec
    structure = "single" if out_spec is not None and out_spec.num_children == 0 else "sequence"
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(inputs):
        raise ValueError(f"the model takes {len(placeholders)} inputs, {len(inputs)} were given")
    return TracedModel(gm, inputs, names or [f"input{k}" for k in range(len(inputs))], structure,
                       weight_names)


def _prepare(traced: TracedModel) -> Any:
    from torch_webgpu.compiler.fx_import import prepare_graph

    prepared = prepare_graph(traced.graph_module, list(traced.example_inputs))
    if prepared.kept_inputs != list(range(len(traced.example_inputs))):
        raise NotImplementedError("a bundle's inputs must all reach the compiled graph")
    return prepared


def prepared_constants(traced: TracedModel) -> list[Any]:
    """The constants the compiled graph takes after the model's inputs, in order (as numpy arrays)."""
    return [t.detach().cpu().numpy() for t in _prepare(traced).constants]


def _high_module(traced: TracedModel) -> Any:
    """The model imported into the torch dialect, after our high passes."""
    from mlir_passes.torch_passes import run_high_passes
    from torch_webgpu.compiler.fx_import import import_graph

    module = import_graph(_prepare(traced).graph_module)
    run_high_passes(module)
    return module


def high_ir_text(traced: TracedModel) -> str:
    """The high IR (torch dialect after our passes) of the model, printed."""
    from torch_webgpu.compiler.high_ir import build_high_ir

    return str(build_high_ir(_high_module(traced)))


def iree_input_text(traced: TracedModel, target: Target) -> str:
    """The MLIR module handed to IREE: torch dialect after our passes, with the WebGPU target attached."""
    from mlir_passes.iree_driver import with_target

    return with_target(str(_high_module(traced)), target.iree)


@contextlib.contextmanager
def _dump_dir(path: str | os.PathLike | None) -> Iterator[None]:
    if path is None:
        yield
        return
    with overridden(DUMP_DIR, str(path)):
        yield


def compile_traced(traced: TracedModel, target: Target, dump_dir: str | os.PathLike | None = None) -> Any:
    """The low-IR Plan of a traced model for `target` (through the compiler's disk cache)."""
    from torch_webgpu.compiler.webgpu_compiler import compile_plan

    with torch.no_grad(), _dump_dir(dump_dir):
        return compile_plan(_prepare(traced), list(traced.example_inputs), target=target.iree)


def _versions() -> dict[str, str]:
    out = {}
    for pkg in ("torch-webgpu", "torch", "torch-mlir", "iree-base-compiler"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "?"
    return out


def model_weights(module: Any) -> dict[str, Any]:
    """Every parameter and buffer of `module` by its state-dict name (tied weights under each name), what
    `load(path, weights=...)` takes for a bundle exported with external weights. A tensor subclass
    (torchao's quantized weights) is given as its flattened parts, named as torch.export names them:
    `<module>.parametrizations.<name>.original<i>` for the i-th of `__tensor_flatten__`'s attributes."""
    weights = dict(module.named_buffers(remove_duplicate=False))
    weights.update(module.named_parameters(remove_duplicate=False))
    flat: dict[str, Any] = {}
    for name, value in weights.items():
        if type(value) not in (torch.Tensor, torch.nn.Parameter) and hasattr(value, "__tensor_flatten__"):
            prefix, _, leaf = name.rpartition(".")
            attrs, _ = value.__tensor_flatten__()
            for i, attr in enumerate(attrs):
                key = f"{prefix + '.' if prefix else ''}parametrizations.{leaf}.original{i}"
                flat[key] = getattr(value, attr)
        else:
            flat[name] = value
    return flat


def _constant_weight_names(traced: TracedModel) -> list[str | None]:
    """The model's name of each plan constant `_const_<k>`, in order (None: a constant not in the model's
    state, e.g. a lifted tensor literal)."""
    return [traced.weight_names.get(source) for source in _prepare(traced).constant_sources]


def _split_external_weights(plan: Any, traced: TracedModel) -> tuple[Any, dict[str, Any]]:
    """A copy of `plan` without the constants that are model weights, and the manifest entry naming them:
    the loader takes those weights from the caller (`load(path, weights=model.state_dict())`)."""
    import copy

    # The compiler names the graph's constants `_const_<k>`; any other plan constant (IREE's own) stays.
    names = {f"_const_{k}": name for k, name in enumerate(_constant_weight_names(traced))}
    if not set(names) <= set(plan.constants):
        raise RuntimeError("the plan's constants do not match the model's weights; export without external "
                           "weights")
    external, kept = {}, {}
    packed = plan.meta.get("packed_constants", {})
    originals = dict(zip(names, prepared_constants(traced), strict=False)) if packed else {}
    for const, value in plan.constants.items():
        if names.get(const) is None:
            kept[const] = value
        elif const in packed:
            # a quantized weight packed for the kernel: the caller gives it as the model holds it
            raw = originals[const]
            external[const] = {"name": names[const], "shape": list(raw.shape), "dtype": str(raw.dtype),
                               "pack": packed[const]}
        else:
            external[const] = {"name": names[const], "shape": list(value.shape), "dtype": str(value.dtype)}
    stripped = copy.copy(plan)
    stripped.constants = kept
    return stripped, {"order": list(plan.constants), "weights": external}


def write_plan_bundle(plan: Any, traced: TracedModel, target: Target, path: str | os.PathLike,
                      source: str = "", external_weights: bool = False) -> Path:
    """Write `plan` as a bundle at `path` (directory or .zip) after checking it fits `target`.

    `external_weights`: leave the model's weights out (the loader is given them); the bundle holds code only.
    """
    import tempfile

    requires = plan_requirements(plan, target.iree.workgroup_memory_bytes, target.iree.offset_alignment,
                                 target.iree.subgroup_size)
    check_requirements(requires, target.limits, target.features, what=f"target {target.name}")
    external = None
    if external_weights:
        plan, external = _split_external_weights(plan, traced)
    with tempfile.TemporaryDirectory(prefix="torch-webgpu-export-") as tmp:
        plan.save(tmp)   # the plan's own serialisation: plan.json, .wgsl files, constants.safetensors
        files = {p.name: p.read_bytes() for p in Path(tmp).iterdir() if p.name != "plan.json"}
        doc = json.loads(Path(tmp, "plan.json").read_text())
    outputs = [{"name": f"output{k}", "shape": list(s.shape), "dtype": s.dtype}
               for k, s in enumerate(plan.outputs)]
    inputs = [{"name": name, "shape": list(s.shape), "dtype": s.dtype}
              for name, s in zip(traced.input_names, plan.inputs, strict=True)]
    manifest = {
        "format": BUNDLE_FORMAT,
        "format_version": BUNDLE_FORMAT_VERSION,
        "producer": _versions(),
        "source": source,
        "target": {"name": target.name, "key": target.iree.key(), "f16": target.f16},
        "inputs": inputs,
        "outputs": outputs,
        "output_structure": traced.output_structure if len(outputs) == 1 else "sequence",
        "requires": requires,
        "dispatches": plan.dispatch_count,
        "plan": doc,
    }
    if external is not None:
        manifest["external_weights"] = external
    return write_bundle(path, manifest, files)


def export(model: Any, example_inputs: Sequence[Any], path: str | os.PathLike, *, target: str = "auto",
           f16: bool = False, dump_dir: str | os.PathLike | None = None, source: str = "",
           external_weights: bool = False) -> Path:
    """Compile `model` for `example_inputs`' shapes and dtypes into a bundle at `path` (a directory, or
    one file if it ends in .zip). `target`: "auto" (this adapter), "webgpu-core" or a limits JSON file.
    Weights are baked in unless `external_weights` (then `load(path, weights=model.state_dict())`)."""
    tgt = make_target(target, f16)
    traced = trace(model, example_inputs, f16=f16)
    plan = compile_traced(traced, tgt, dump_dir)
    return write_plan_bundle(plan, traced, tgt, path, source=source, external_weights=external_weights)
