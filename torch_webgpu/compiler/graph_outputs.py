"""What a compiled graph returns, from its plan's outputs: the plan's `output_map` read per call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def graph_output(entry: Any, outputs: Sequence[Any], args: Sequence[Any]) -> Any:
    """One graph output: a plan output, None, or a size (["const", v] or ["dim", input, axis])."""
    if entry is None or isinstance(entry, int):
        return None if entry is None else outputs[entry]
    if entry[0] == "const":
        return entry[1]
    return int(args[entry[1]].shape[entry[2]])
