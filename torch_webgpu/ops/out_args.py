"""Writing a computed result into an aten `out=` tensor (resized to the result's shape first)."""

from __future__ import annotations

from collections.abc import Callable

import torch


def write_out(out: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """Resize `out` to `value`'s shape, copy `value` into it and return it."""
    out.resize_(value.shape)
    return out.copy_(value)


def out_variant(kernel: Callable, *names: str) -> Callable:
    """The kernel of an op's out= overload: runs the functional `kernel` (same arguments minus the out
    tensors, which aten passes as the keyword arguments `names`) and writes each result into its tensor."""

    def run(*args, **kwargs):
        outs = [kwargs.pop(name) for name in names]
        results = kernel(*args, **kwargs)
        if len(names) == 1:
            return write_out(outs[0], results)
        return tuple(write_out(o, r) for o, r in zip(outs, results, strict=True))

    run.__name__ = run.__qualname__ = f"{kernel.__name__}_out"
    run.__doc__ = f"{kernel.__doc__.splitlines()[0].rstrip('.')} (out=)."
    return run
