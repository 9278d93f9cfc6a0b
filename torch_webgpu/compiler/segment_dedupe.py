"""Identical IREE segments compile once: the segments between library ops repeat block after block (a
ConvNeXt stage's nine layer norms and GELUs, MobileNetV2's residual adds), and IREE's time grows with
the functions of its module, so each distinct segment graph goes to IREE once and its plan serves every
segment with the same signature (PlanComposer.add_segment(..., repeat=True) gives a repeat its own
transient buffers)."""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

from .operands import value_of


def _value_signature(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), str(value.dtype), tuple(value.stride()),
                int(value.storage_offset()))
    if isinstance(value, (list, tuple)):
        return tuple(_value_signature(v) for v in value)
    return repr(value)


def segment_signature(gm: torch.fx.GraphModule) -> str | None:
    """A string equal for two segment graphs exactly when they compute the same thing on values of the
    same shapes, dtypes and strides (node names aside); None when a node holds a tensor or a module
    attribute (never shared)."""
    index: dict[torch.fx.Node, int] = {}
    held_tensor = False

    def arg(x: Any) -> Any:
        nonlocal held_tensor
        if isinstance(x, torch.fx.Node):
            return f"%{index[x]}"
        if isinstance(x, torch.Tensor):
            held_tensor = True
        return x

    parts = []
    for i, node in enumerate(gm.graph.nodes):
        if node.op == "get_attr":
            return None
        index[node] = i
        args = torch.fx.node.map_aggregate(node.args, arg)
        kwargs = torch.fx.node.map_aggregate(node.kwargs, arg)
        value = value_of(node) if node.op != "output" else None
        target = "" if node.op == "placeholder" else str(node.target)   # a placeholder's target: its name
        parts.append(repr((node.op, target, args, kwargs, _value_signature(value))))
    return None if held_tensor else "\n".join(parts)


def unique_segments(graphs: list[torch.fx.GraphModule]) -> list[int]:
    """For each graph, the index of the first graph with its signature (its own index if none before)."""
    first: dict[str, int] = {}
    out = []
    for k, gm in enumerate(graphs):
        signature = segment_signature(gm)
        out.append(k if signature is None else first.setdefault(signature, k))
    return out
