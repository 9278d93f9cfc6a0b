"""The plan runtime's one seam to torch: making and reading torch tensors for calls that pass them.

plan/ never imports torch at module level (tests/test_layers.py checks it), so bundles run where torch is
not installed. Each function here imports torch when it runs, and runs only for a call whose inputs are
torch tensors or webgpu tensors, which means the caller has imported torch already (the import is a
dictionary lookup then). Everything else in plan/ treats tensors by duck typing (`.shape`, `.dtype`,
`.data_ptr()`, `.device`), which numpy arrays and DeviceArrays answer differently.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def torch_dtype(name: str) -> Any:
    """The torch dtype named `name` (`float32`, `int64`, ...)."""
    import torch

    return getattr(torch, name)


def empty(shape: Sequence[int], dtype: Any, device: Any) -> Any:
    """A new torch tensor of `shape` and dtype `dtype` (a torch dtype or its name) on `device` (a webgpu
    output tensor)."""
    import torch

    return torch.empty(shape, dtype=getattr(torch, dtype) if type(dtype) is str else dtype, device=device)


def from_host(array: np.ndarray, dtype: str, device: Any) -> Any:
    """`array` as a torch tensor of dtype `dtype`, on `device` (None: the CPU)."""
    import torch

    out = torch.from_numpy(array).to(getattr(torch, dtype))
    # Demoted dtypes (int64, float64) come back through the host to the inputs' device.
    return out if device is None else out.to(device)


def host_bits(t: Any) -> np.ndarray:
    """A torch tensor's values on the host as a numpy array with the same bits (bfloat16, which numpy
    lacks, as int16)."""
    import torch

    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy()
