"""The one WGSL prelude of eager ops and library kernels; torch-free.

`math.PRELUDE`: the helpers every eager elementwise shader carries (NaN-aware min/max, expm1/log1p,
erf/erfc/erfinv, pow, exact trigonometry, int64 pairs, ...); `special`: ATen's special functions, taken
per formula (`helpers_for`); `storage`: how each storage dtype is packed into u32 words and loaded.
A library kernel takes from here only the functions its expressions call (`functions_for`), so a fused
matmul + GELU and the eager GELU evaluate the same `erf_`: each function has one source, here.
"""

from __future__ import annotations

import re

from . import math, special
from .math import PRELUDE
from .special import helpers_for
from .storage import INT64_INDEX_LOAD, STORAGE, DtypeInfo, convert, load_fn

_NAMES = re.compile(r"\b([A-Za-z_]\w*)\b")


def functions_for(*exprs: str) -> str:
    """WGSL of every prelude or special function (and struct) that `exprs` reach, with what they call:
    prelude ones in the prelude's order, then special ones callees first."""
    reached: set[str] = set()

    def visit(name: str) -> None:
        if name in reached:
            return
        reached.add(name)
        body = math.FUNCTIONS.get(name) or special.FUNCTIONS[name]
        for callee in _NAMES.findall(body.split("\n", 1)[1] if "\n" in body else body):
            if callee in math.FUNCTIONS or callee in special.FUNCTIONS:
                visit(callee)

    for expr in exprs:
        for name in _NAMES.findall(expr):
            if name in math.FUNCTIONS or name in special.FUNCTIONS:
                visit(name)
    prelude = "".join(text for name, text in math.FUNCTIONS.items() if name in reached)
    return prelude + helpers_for(" ".join(f"{name}()" for name in reached if name in special.FUNCTIONS))


__all__ = ["PRELUDE", "STORAGE", "INT64_INDEX_LOAD", "DtypeInfo", "convert", "load_fn", "functions_for",
           "helpers_for", "math", "special"]
