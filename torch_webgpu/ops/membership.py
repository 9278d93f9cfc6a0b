"""torch.isin on the device: every element compared with every test element (equality, any), in chunks
of elements so the comparison matrix stays within _MAX_PAIRS."""

from __future__ import annotations

import torch

from .out_args import write_out
from .registry import register

_MAX_PAIRS = 1 << 24  # elements x test elements compared per chunk


def _isin(elements: torch.Tensor, tests: torch.Tensor, invert: bool) -> torch.Tensor:
    flat, pool = elements.reshape(-1), tests.reshape(1, -1)
    if pool.numel() == 0 or flat.numel() == 0:
        return torch.full(elements.shape, invert, dtype=torch.bool, device=elements.device)
    step = max(1, _MAX_PAIRS // pool.numel())
    parts = [(flat[i:i + step].unsqueeze(1) == pool).any(1) for i in range(0, flat.numel(), step)]
    found = parts[0] if len(parts) == 1 else torch.cat(parts)
    return (~found if invert else found).reshape(elements.shape)


@register("isin.Tensor_Tensor_out")
def isin_out(elements, test_elements, *, assume_unique=False, invert=False, out):
    """torch.isin(elements, test_elements, out=)."""
    return write_out(out, _isin(elements, test_elements, invert))


@register("isin.Tensor_Scalar_out")
def isin_scalar_out(elements, test_element, *, assume_unique=False, invert=False, out):
    """torch.isin(elements, number, out=)."""
    return write_out(out, (elements != test_element) if invert else (elements == test_element))


@register("isin.Scalar_Tensor_out")
def isin_of_scalar_out(element, test_elements, *, assume_unique=False, invert=False, out):
    """torch.isin(number, test_elements, out=)."""
    found = (test_elements == element).any() if test_elements.numel() else \
        torch.zeros((), dtype=torch.bool, device=test_elements.device)
    return write_out(out, ~found if invert else found)
