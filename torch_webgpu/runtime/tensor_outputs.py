"""How a compiled call makes its webgpu output tensors without the dispatcher: the device layer
(torch_webgpu.device.register) installs the extension's `_new_outputs` here, so the compiler, which runs
bundles without torch and never imports the extension, finds it one layer down."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# new_outputs(specs, results, ids, recycle): per (sizes, strides, dtype) spec a new webgpu tensor appended
# to `results` and its buffer id to `ids` (recycle: it may be the id of a freed storage of the same size);
# None until the device layer is registered.
new_outputs: Callable[[tuple, list, list, bool], Any] | None = None


def install(fn: Callable[[tuple, list, list, bool], Any]) -> None:
    """Make `fn` the maker of compiled calls' output tensors."""
    global new_outputs
    new_outputs = fn
