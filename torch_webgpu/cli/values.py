"""Tensor arguments in iree-run-module's style: `4x16xf32` (a type), `@x.npy` (a file),
`1x4xf32=1,2,3,4` (values; one value fills the tensor), `4x16xf32` alone for `run` (zeros)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

# IREE's element type names, and torch's / numpy's.
DTYPES: dict[str, str] = {
    "f32": "float32", "f16": "float16", "i64": "int64", "i32": "int32", "i16": "int16", "i8": "int8",
    "ui8": "uint8", "u8": "uint8", "i1": "bool", "bool": "bool",
    "float32": "float32", "float16": "float16", "int64": "int64", "int32": "int32", "int16": "int16",
    "int8": "int8", "uint8": "uint8",
}
_SHORT = {"float32": "f32", "float16": "f16", "int64": "i64", "int32": "i32", "int16": "i16", "int8": "i8",
          "uint8": "ui8", "bool": "i1"}


@dataclass
class TensorType:
    """A shape and dtype (numpy name) parsed from `4x16xf32`."""

    shape: list[int]
    dtype: str

    def __str__(self) -> str:
        return type_string(self.shape, self.dtype)


def type_string(shape: list[int], dtype: str) -> str:
    """`4x16xf32` for shape [4, 16] and float32."""
    return "x".join([*(str(d) for d in shape), _SHORT.get(dtype, dtype)])


def parse_type(text: str) -> TensorType:
    """`4x16xf32` -> TensorType([4, 16], 'float32'); `f32` is a scalar."""
    *dims, elem = text.strip().split("x")
    if elem not in DTYPES:
        if elem in ("f64", "float64"):
            raise ValueError(f"{text!r}: float64 has no WebGPU type; use f32")
        known = ", ".join(sorted(_SHORT.values()))
        raise ValueError(f"{text!r}: unknown element type {elem!r} (use one of {known})")
    try:
        shape = [int(d) for d in dims]
    except ValueError:
        raise ValueError(f"{text!r}: dimensions must be integers, as in 4x16xf32") from None
    if any(d < 0 for d in shape):
        raise ValueError(f"{text!r}: negative dimension")
    return TensorType(shape, DTYPES[elem])


def parse_value(text: str) -> np.ndarray:
    """A tensor for `run`: `@file.npy`, `TYPE=v1,v2,...` (one value fills it) or `TYPE` (zeros)."""
    if text.startswith("@"):
        path = Path(text[1:])
        if path.suffix != ".npy":
            raise ValueError(f"{text!r}: only .npy files are read (numpy.save)")
        return np.load(path, allow_pickle=False)
    spec, _, values = text.partition("=")
    tt = parse_type(spec)
    if not values:
        return np.zeros(tt.shape, dtype=tt.dtype)
    items = [v for v in values.replace("[", "").replace("]", "").replace(" ", ",").split(",") if v]
    if tt.dtype == "bool":
        data = np.array([v.lower() in ("1", "true") for v in items], dtype=bool)
    else:
        data = np.array([float(v) for v in items]).astype(tt.dtype)
    count = int(np.prod(tt.shape, dtype=np.int64))
    if data.size == 1:
        return np.full(tt.shape, data[0], dtype=tt.dtype)
    if data.size != count:
        raise ValueError(f"{text!r}: {data.size} values for a {spec} tensor ({count} elements)")
    return data.reshape(tt.shape)


def format_value(array: np.ndarray) -> str:
    """`4x8xf32=[...]` (iree-run-module's result style)."""
    body = np.array2string(array, threshold=64, edgeitems=3, max_line_width=100)
    return f"{type_string(list(array.shape), array.dtype.name)}={body}"
