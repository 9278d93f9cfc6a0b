"""How values cross the plan boundary: device dtypes, their numpy types and sizes, and the int32 range.

WebGPU shaders have no 64-bit types: a plan stores int64 and float64 as int32 and float32 (IREE demotes
them the same way) and bool as int32 (compiler/fx_import.py `_bool_boundaries_as_int32`). A TensorSpec's
`dtype` is the graph's (torch's name), its `device_dtype` what the plan's buffers hold.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .format import TensorSpec

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
NUMPY_DTYPES = {"float32": np.float32, "float16": np.float16, "int32": np.int32, "int16": np.int16,
                "int8": np.int8, "uint8": np.uint8, "bool": np.bool_}
ITEMSIZE = {name: np.dtype(t).itemsize for name, t in NUMPY_DTYPES.items()}
SCALAR = "index"   # device_dtype of a host scalar input (a symbolic int, dynamic=True): no buffer


def device_dtype(dtype: Any) -> str:
    """How a torch dtype crosses the plan boundary: 64-bit types are demoted (IREE does the same) and
    bool travels as int32 (see fx_import._bool_boundaries_as_int32)."""
    name = str(dtype).removeprefix("torch.")
    return {"int64": "int32", "float64": "float32", "bool": "int32"}.get(name, name)


def shape_nbytes(shape: Sequence[int], device_dtype_name: str) -> int:
    """Bytes of a `shape` array of `device_dtype_name`."""
    # math.prod on Python ints: np.prod costs microseconds per call, and this runs per input per call.
    return math.prod(int(d) for d in shape) * ITEMSIZE[device_dtype_name]


def spec_nbytes(spec: TensorSpec) -> int:
    """Bytes of a (resolved) tensor spec on the device."""
    return shape_nbytes(spec.shape, spec.device_dtype)


_DTYPE_FACTS: dict[Any, tuple[bool, str | None]] = {}


def dtype_facts(dtype: Any) -> tuple[bool, str | None]:
    """(is int64, its name if it crosses the plan boundary unchanged, else None) of a torch dtype; cached:
    this runs per input per call, and the string work behind it costs microseconds."""
    facts = _DTYPE_FACTS.get(dtype)
    if facts is None:
        name = str(dtype).removeprefix("torch.")
        facts = _DTYPE_FACTS[dtype] = (name == "int64", name if device_dtype(dtype) == name else None)
    return facts
