"""Index expressions of a dynamic-shape plan, as JSON-friendly values (part of the plan format).

An expression is an int or a list `[op, *operands]`: `["dim", k, axis]` is dimension `axis` of host input
`k`; other ops are IREE's host index arithmetic (`arith.*` names, `align`, `cmp.<predicate>`, `select`).
The extractor (mlir_passes/host_program.py) folds operations whose operands are all ints, so static
programs contain ints only; a plan evaluates the rest once per input-shape signature (plan/layout.py, and
torch-webgpu.js the same way). Pure Python: plans load without IREE.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Expr = Any   # int | list


def _ceildiv(a: int, b: int) -> int:
    return -(-a // b)


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _trunc_rem(a: int, b: int) -> int:
    return a - b * _trunc_div(a, b)


BINARY: dict[str, Callable[[int, int], int]] = {
    "addi": lambda a, b: a + b, "subi": lambda a, b: a - b, "muli": lambda a, b: a * b,
    "divui": lambda a, b: a // b, "divsi": _trunc_div, "floordivsi": lambda a, b: a // b,
    "ceildivui": _ceildiv, "ceildivsi": _ceildiv, "remui": lambda a, b: a % b, "remsi": _trunc_rem,
    "minsi": min, "minui": min, "maxsi": max, "maxui": max,
    "andi": lambda a, b: a & b, "ori": lambda a, b: a | b, "xori": lambda a, b: a ^ b,
    "shli": lambda a, b: a << b, "shrui": lambda a, b: a >> b, "shrsi": lambda a, b: a >> b,
    "align": lambda a, b: _ceildiv(a, b) * b,
}
# Casts between index and integer widths: values here are exact Python ints; `trunci` keeps 32 bits.
UNARY: dict[str, Callable[[int], int]] = {
    "index_castui": lambda a: a, "index_cast": lambda a: a, "extui": lambda a: a, "extsi": lambda a: a,
    "trunci": lambda a: a & 0xFFFFFFFF,
}
COMPARE: dict[str, Callable[[int, int], bool]] = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "slt": lambda a, b: a < b,
    "sle": lambda a, b: a <= b, "sgt": lambda a, b: a > b, "sge": lambda a, b: a >= b,
    "ult": lambda a, b: a < b, "ule": lambda a, b: a <= b, "ugt": lambda a, b: a > b,
    "uge": lambda a, b: a >= b,
}


def is_static(value: Expr) -> bool:
    """True for a plain int (no input dimension involved)."""
    return isinstance(value, int)


def supported(op: str) -> bool:
    """Whether `op` (an arith op name without `arith.`, `align`, `select` or `cmp.<pred>`) is known."""
    return op in BINARY or op in UNARY or op == "select" or (op.startswith("cmp.") and op[4:] in COMPARE)


def _apply(op: str, args: Sequence[int]) -> int:
    if op in BINARY:
        return BINARY[op](args[0], args[1])
    if op in UNARY:
        return UNARY[op](args[0])
    if op == "select":
        return args[1] if args[0] else args[2]
    return int(COMPARE[op[4:]](args[0], args[1]))


def fold(op: str, *operands: Expr) -> Expr:
    """`op` applied to `operands`: an int when they all are, else the expression."""
    if not supported(op):
        raise ValueError(f"unknown host index op {op}")
    if all(isinstance(a, int) for a in operands):
        return _apply(op, operands)
    return [op, *operands]


def dim(input_index: int, axis: int) -> Expr:
    """Dimension `axis` of host input `input_index`."""
    return ["dim", input_index, axis]


def evaluate(value: Expr, shapes: Sequence[Sequence[int]]) -> int:
    """The value of an expression for host inputs of `shapes`."""
    if isinstance(value, int):
        return value
    op, *operands = value
    if op == "dim":
        return int(shapes[operands[0]][operands[1]])
    return _apply(op, [evaluate(a, shapes) for a in operands])


def evaluate_all(obj: Any, shapes: Sequence[Sequence[int]]) -> Any:
    """`obj` (JSON-like: dicts, lists of ints and expressions) with every expression evaluated."""
    if isinstance(obj, list) and obj and isinstance(obj[0], str) and (obj[0] == "dim" or supported(obj[0])):
        return evaluate(obj, shapes)
    if isinstance(obj, list):
        return [evaluate_all(v, shapes) for v in obj]
    if isinstance(obj, tuple):
        return tuple(evaluate_all(v, shapes) for v in obj)
    if isinstance(obj, dict):
        return {k: evaluate_all(v, shapes) for k, v in obj.items()}
    return obj


def contains_expression(obj: Any) -> bool:
    """Whether a JSON-like value holds any (non-int) expression."""
    if isinstance(obj, list) and obj and isinstance(obj[0], str) and (obj[0] == "dim" or supported(obj[0])):
        return True
    if isinstance(obj, (list, tuple)):
        return any(contains_expression(v) for v in obj)
    if isinstance(obj, dict):
        return any(contains_expression(v) for v in obj.values())
    return False
