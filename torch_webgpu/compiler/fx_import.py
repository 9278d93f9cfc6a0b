"""FX graph (from AOTAutograd) -> torch-dialect module with torch-mlir's FX importer.

Parameters are already graph inputs after AOTAutograd, so weights stay in device buffers and updates are
seen. Lifted constants (`get_attr`) also become inputs (uploaded once by the plan) instead of being
inlined. Outputs are normalised: `None` outputs are dropped and re-inserted by the host.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.fx
from torch.fx.passes.shape_prop import _extract_tensor_metadata

from .conv_padding import crop_conv_padding


@dataclass
class PreparedGraph:
    """The graph to import, the constants appended as extra inputs, and where each output comes from."""

    graph_module: torch.fx.GraphModule
    constants: list[torch.Tensor] = field(default_factory=list)
    # For every original output: index into the compiled results, None for a `None` output, or a size
    # computed on the host: ["const", v] or ["dim", input, axis].
    output_map: list = field(default_factory=list)
    num_user_inputs: int = 0
    kept_inputs: list[int] = field(default_factory=list)   # graph inputs the plan takes (ints are folded)
    output_vals: list = field(default_factory=list)        # outputs' example values (before bool->int32)
    constant_sources: list[str] = field(default_factory=list)  # the `get_attr` target of each constant


def prepare_graph(gm: torch.fx.GraphModule, example_inputs: list | None = None) -> PreparedGraph:
    """Copy `gm`, turn `get_attr` constants into trailing placeholders, fold integer inputs (a plan is
    specialised on them) and drop `None` outputs."""
    gm = torch.fx.GraphModule(gm, gm.graph.__deepcopy__())
    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    kept_inputs = list(range(len(placeholders)))
    if example_inputs is not None:
        kept_inputs = []
        for k, (node, value) in enumerate(zip(placeholders, example_inputs, strict=True)):
            if isinstance(value, (int, float, bool)) and not isinstance(value, torch.Tensor):
                node.replace_all_uses_with(value)
                graph.erase_node(node)
            elif isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
                if _symbol_from_tensor_dims(graph, node, value, placeholders, example_inputs):
                    kept_inputs.append(k)
            else:
                kept_inputs.append(k)
        placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    constants: list[torch.Tensor] = []
    sources: list[str] = []
    last = placeholders[-1] if placeholders else None
    for node in list(graph.nodes):
        if node.op != "get_attr":
            continue
        value = getattr(gm, node.target) if "." not in node.target else gm.get_submodule(
            node.target.rsplit(".", 1)[0]).get_parameter(node.target.rsplit(".", 1)[1])
        if not isinstance(value, torch.Tensor):
            continue
        first = next(iter(graph.nodes))
        ctx = graph.inserting_after(last) if last is not None else graph.inserting_before(first)
        with ctx:
            ph = graph.placeholder(f"_const_{len(constants)}")
        ph.meta = dict(node.meta)
        ph.meta.pop("val", None)
        ph.meta["tensor_meta"] = _extract_tensor_metadata(value)
        node.replace_all_uses_with(ph)
        graph.erase_node(node)
        constants.append(value.detach())
        sources.append(node.target)
        last = ph
    _drop_device_transfers(graph)
    _aliases_torch_mlir_knows(graph)
    _bool_reductions_as_int(graph)
    crop_conv_padding(graph)
    output = next(n for n in graph.nodes if n.op == "output")
    results = output.args[0]
    results = list(results) if isinstance(results, (tuple, list)) else [results]
    kept, output_map = [], []
    for r in results:
        val = r.meta.get("val") if isinstance(r, torch.fx.Node) else r
        if r is None:
            output_map.append(None)
        elif isinstance(val, (int, torch.SymInt)) and not isinstance(val, bool):
            # A size output (AOTAutograd saves symbolic sizes for the backward graph): computed on the
            # host from the input shapes, not by the plan.
            output_map.append(_size_output(val, placeholders))
        else:
            output_map.append(len(kept))
            kept.append(r)
    output_vals = [r.meta.get("val") if isinstance(r, torch.fx.Node) else r for r in kept]
    kept = _bool_boundaries_as_int32(graph, kept)
    output.args = (tuple(kept),)
    graph.lint()
    gm.recompile()
    return PreparedGraph(gm, constants, output_map, len(placeholders), kept_inputs, output_vals, sources)


def _size_output(value: object, placeholders: list) -> list:
    """The output_map entry of an int output: ["const", v], or ["dim", input, axis] for a symbolic size."""
    if isinstance(value, int):
        return ["const", value]
    for k, ph in enumerate(placeholders):
        tensor = ph.meta.get("val")
        if isinstance(tensor, torch.Tensor):
            for axis, size in enumerate(tensor.shape):
                if isinstance(size, torch.SymInt) and size.node.expr == value.node.expr:
                    return ["dim", k, axis]
    raise NotImplementedError(f"dynamic=True: the graph returns the size {value}, which is not a dimension "
                              "of a tensor input (compile with dynamic=False)")


def _symbol_from_tensor_dims(graph: torch.fx.Graph, node: torch.fx.Node, value: object,
                             placeholders: list, example_inputs: list) -> bool:
    """A symbolic-size input (dynamic=True) is read from a tensor input's dimension instead (IREE then
    reads it from the tensor's buffer view); True when it must stay an input: a SymInt that is no
    tensor's dimension becomes a host scalar of the plan."""
    if node.users:
        source = None
        if isinstance(value, torch.SymInt):
            for ph, tensor in zip(placeholders, example_inputs, strict=True):
                if isinstance(tensor, torch.Tensor):
                    for axis, size in enumerate(tensor.shape):
                        if isinstance(size, torch.SymInt) and size.node.expr == value.node.expr:
                            source = (ph, axis)
                            break
                if source:
                    break
        if source is None and isinstance(value, torch.SymInt):
            return True
        if source is None:
            raise NotImplementedError(
                f"dynamic=True: graph input {node.name} = {value} is a symbolic {type(value).__name__}; "
                "the WebGPU plan takes symbolic ints only (compile with dynamic=False)")
        first_op = next(n for n in graph.nodes if n.op != "placeholder")
        with graph.inserting_before(first_op):
            size = graph.call_function(torch.ops.aten.sym_size.int, source)
        size.meta["val"] = value
        node.replace_all_uses_with(size)
    graph.erase_node(node)
    return False


def _bool_boundaries_as_int32(graph: torch.fx.Graph, outputs: list) -> list:
    """Bool graph inputs and outputs cross memory as int32: IREE's i1 storage on a target without 8-bit
    storage writes one i32 per element into a buffer sized one byte per element (wrong results)."""
    convert = torch.ops.prims.convert_element_type.default
    for ph in [n for n in graph.nodes if n.op == "placeholder"]:
        val = ph.meta.get("val")
        if not (isinstance(val, torch.Tensor) and val.dtype == torch.bool and hasattr(val, "fake_mode")):
            continue
        with graph.inserting_after(ph):
            as_bool = graph.call_function(convert, (ph, torch.bool))
        ph.replace_all_uses_with(as_bool, delete_user_cb=lambda user, keep=as_bool: user is not keep)
        as_bool.meta["val"] = val
        with val.fake_mode:
            ph.meta["val"] = val.to(torch.int32)
        ph.meta.pop("tensor_meta", None)
    result = []
    for r in outputs:
        val = r.meta.get("val") if isinstance(r, torch.fx.Node) else None
        if isinstance(val, torch.Tensor) and val.dtype == torch.bool and hasattr(val, "fake_mode"):
            with graph.inserting_after(r):
                as_int = graph.call_function(convert, (r, torch.int32))
            with val.fake_mode:
                as_int.meta["val"] = val.to(torch.int32)
            r = as_int
        result.append(r)
    return result


def _drop_device_transfers(graph: torch.fx.Graph) -> None:
    """A compiled graph runs on one device: `_to_copy` to a device becomes a dtype conversion (or
    nothing), and factory ops are built as if on cpu (the shaders do not care where constants come from)."""
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        if node.target is torch.ops.aten._to_copy.default and set(node.kwargs) <= {
                "device", "dtype", "layout", "pin_memory", "non_blocking", "memory_format"}:
            src = node.args[0]
            dtype = node.kwargs.get("dtype")
            src_val = src.meta.get("val") if isinstance(src, torch.fx.Node) else None
            if dtype is None or (src_val is not None and src_val.dtype == dtype):
                node.replace_all_uses_with(src)
                graph.erase_node(node)
            else:
                with graph.inserting_before(node):
                    conv = graph.call_function(torch.ops.prims.convert_element_type.default, (src, dtype))
                conv.meta = dict(node.meta)
                node.replace_all_uses_with(conv)
                graph.erase_node(node)
        elif node.target is torch.ops.prims.device_put.default:
            # A host scalar (0-d cpu tensor) moved next to the others: the plan already holds it.
            node.replace_all_uses_with(node.args[0])
            graph.erase_node(node)
        elif isinstance(node.kwargs.get("device"), torch.device) and node.kwargs["device"].type != "cpu":
            node.kwargs = {**node.kwargs, "device": torch.device("cpu")}


_ALIASES = {torch.ops.aten.true_divide.Tensor: torch.ops.aten.div.Tensor}


def _aliases_torch_mlir_knows(graph: torch.fx.Graph) -> None:
    """Ops torch-mlir does not import under their alias name (dynamic=True turns Python float constants
    into 0-d tensor inputs, and decompositions then divide them with `true_divide`)."""
    for node in graph.nodes:
        if node.op == "call_function" and node.target in _ALIASES:
            node.target = _ALIASES[node.target]


def _bool_reductions_as_int(graph: torch.fx.Graph) -> None:
    """all/any over a dim become amin/amax over int32 then != 0: IREE reduces i1 through i8 arrays the
    WebGPU target cannot store (and packed-bool reductions are the least trodden path of the emitter)."""
    aten = torch.ops.aten
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in (aten.all.dim, aten.any.dim):
            continue
        src = node.args[0]
        src_val = src.meta.get("val") if isinstance(src, torch.fx.Node) else None
        if src_val is None or node.meta.get("val") is None:
            continue
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        keepdim = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
        reduce = aten.amin.default if node.target is aten.all.dim else aten.amax.default
        fake_mode = getattr(src_val, "fake_mode", None)
        if fake_mode is None or not isinstance(dim, int):
            continue
        with graph.inserting_before(node):
            as_int = graph.call_function(torch.ops.prims.convert_element_type.default, (src, torch.int32))
            reduced = graph.call_function(reduce, (as_int, [dim], keepdim))
            result = graph.call_function(aten.ne.Scalar, (reduced, 0))
        with fake_mode:
            as_int.meta["val"] = src_val.to(torch.int32)
            reduced.meta["val"] = reduce(as_int.meta["val"], [dim], keepdim)
            result.meta["val"] = reduced.meta["val"] != 0
        node.replace_all_uses_with(result)
        graph.erase_node(node)


def import_graph(gm: torch.fx.GraphModule, func_name: str = "main"):
    """The torch_mlir module (raw torch dialect, before any pass) of a stateless FX graph."""
    return import_graphs([(gm, func_name)])


def import_graphs(graphs: list[tuple[torch.fx.GraphModule, str]]):
    """One torch_mlir module with a function per (stateless FX graph, function name)."""
    from torch_mlir import ir
    from torch_mlir.dialects import torch as torch_d
    from torch_mlir.extras.fx_importer import FxImporter

    context = ir.Context()
    torch_d.register_dialect(context)
    importer = FxImporter(context=context)
    for gm, func_name in graphs:
        importer.import_stateless_graph(gm.graph, func_name=func_name)
    return importer.module
