"""The compiler families behind one registry: each matches a pattern of aten nodes that the kernel
library runs as one op (family.py says what a family and its op are); partition.py, the driver, asks them
node by node.

`REGISTRY` is ordered, and where two families start at the same aten target the order is deliberate:
- `bmm`: attention first (the whole `bmm(softmax(bmm(Q, K^T) ...), V)`), else a plain matmul;
- `mm`: the quantized linear first (a dequantized weight), else a plain matmul;
- `amax`: a row op first (`log_softmax` decomposed from its row max), else a reduction.
A new family is a module here with a `FAMILY` and a place in `REGISTRY` (its tests under
tests/compiler/families/); a node no family takes stays in an IREE segment.
"""

from __future__ import annotations

from typing import Any

from . import attention, conv, grouped, matmul, quant, reduce, rows
from .family import Family

REGISTRY: tuple[Family, ...] = (
    attention.FAMILY,   # before matmul: its root is a bmm
    quant.FAMILY,       # before matmul: its root is an mm
    matmul.FAMILY,
    conv.FAMILY,
    rows.FAMILY,        # before reduce: both start at amax
    reduce.FAMILY,
    grouped.FAMILY,     # no roots: groups the linears the others found
)

_BY_ROOT: dict[Any, tuple[Family, ...]] = {}
for _family in REGISTRY:
    for _root in _family.roots:
        _BY_ROOT[_root] = (*_BY_ROOT.get(_root, ()), _family)


def families_at(target: Any) -> tuple[Family, ...]:
    """The families that start at nodes of the aten `target`, in registry order (none: IREE's)."""
    return _BY_ROOT.get(target, ())


__all__ = ["REGISTRY", "Family", "families_at"]
