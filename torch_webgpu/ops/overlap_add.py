"""unfold_backward on the device: the overlap-add of sliding windows back into their input (istft's
reconstruction and the gradient of Tensor.unfold).

Window position j of every window lands at input offsets j + w * step: one strided in-place add per
position (`size` device adds), so overlapping windows accumulate in order without atomics.
"""

from __future__ import annotations

import torch

from .registry import register


@register("unfold_backward", planned=False)
def unfold_backward(grad_in, input_sizes, dim, size, step):
    """Sum the windows grad_in[..., w, ..., j] (windows along `dim`, positions last) into input_sizes."""
    out = torch.zeros(tuple(input_sizes), dtype=grad_in.dtype, device=grad_in.device)
    if out.dim() == 0:
        return out + grad_in.reshape(())
    dim = dim % out.dim()
    windows = grad_in.shape[dim]
    if windows == 0 or out.numel() == 0:
        return out
    sizes = list(out.shape)
    sizes[dim] = windows
    strides = list(out.stride())
    strides[dim] *= step
    for j in range(size):
        view = out.as_strided(sizes, strides, out.storage_offset() + j * out.stride(dim))
        view.add_(grad_in.select(-1, j))
    return out
