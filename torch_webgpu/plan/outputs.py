"""What a call of a plan returns: its outputs collected after the run (one readback for all host-bound
ones), and the graph's outputs read from them through the plan's `output_map`."""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import torch_tensors
from .call import CallState
from .dtypes import NUMPY_DTYPES, spec_nbytes
from .format import TensorSpec


def numpy_mode(args: Sequence[Any]) -> bool:
    """Numpy results when torch is absent or every input is a numpy array."""
    if sys.modules.get("torch") is None:
        return True
    return bool(args) and all(isinstance(a, np.ndarray) for a in args)


def check_output_size(index: int, spec: TensorSpec, size: int) -> None:
    """Raise ValueError unless an OUTPUT node's `size` in bytes fits output `index`'s resolved spec."""
    nbytes = spec_nbytes(spec)
    if nbytes != size and not (nbytes == 0 and size <= 4):
        raise ValueError(f"output {index}: {size} bytes on device, expected {nbytes} "
                         f"for {spec.device_dtype}{spec.shape}")


def finish(state: CallState, args: Sequence[Any], as_numpy: bool = False) -> list[Any]:
    """The plan outputs of a recorded call: host-bound ones read back in one download (the call's only
    submit; else the recorded work is flushed) as numpy arrays (`as_numpy`) or torch tensors on the
    inputs' device, inputs returned as they came, device ones as the executor made them."""
    rt = state.rt
    layout = state.layout
    host_outputs = [i for i, r in state.results.items() if r[0] == "host"]
    raw = b""
    if host_outputs:
        end = max(layout.readback_offsets[i] + spec_nbytes(layout.outputs[i]) for i in host_outputs)
        raw = rt.download(layout.readback, 0, -(-end // 4) * 4)   # the call's only submit
    else:
        rt.flush()
    outputs = []
    for i, spec in enumerate(layout.outputs):
        kind, where = state.results[i]
        if kind == "input":
            outputs.append(args[where])
        elif kind == "host":
            n = math.prod(int(d) for d in spec.shape)
            array = np.frombuffer(raw, dtype=NUMPY_DTYPES[spec.device_dtype], count=n, offset=where)
            array = array.copy().reshape(spec.shape)
            if as_numpy:
                outputs.append(array.astype(np.dtype(spec.dtype), copy=False))
            else:
                outputs.append(torch_tensors.from_host(array, spec.dtype, state.to_device))
        else:
            outputs.append(where)
    return outputs


def graph_output(entry: Any, outputs: Sequence[Any], args: Sequence[Any]) -> Any:
    """One graph output: a plan output, None, or a size (["const", v] or ["dim", input, axis])."""
    if entry is None or isinstance(entry, int):
        return None if entry is None else outputs[entry]
    if entry[0] == "const":
        return entry[1]
    return int(args[entry[1]].shape[entry[2]])
