"""rrelu_with_noise: eval mode is leaky_relu with slope (lower + upper) / 2; training draws each negative
element's slope uniformly from [lower, upper] with the device RNG (like dropout's mask) into `noise`."""

from __future__ import annotations

import torch

from .out_args import write_out
from .registry import register


@register("rrelu_with_noise")
def rrelu_with_noise(self, noise, lower=0.125, upper=1.0 / 3.0, training=False, generator=None):
    """aten.rrelu_with_noise (noise is written in training mode, as on the CPU)."""
    if generator is not None:
        raise NotImplementedError("webgpu: rrelu with an explicit generator is not supported; the device RNG "
                                  "is seeded by torch.manual_seed")
    if not training:
        return torch.nn.functional.leaky_relu(self, (float(lower) + float(upper)) / 2)
    slopes = torch.rand_like(self, dtype=torch.float32) * (float(upper) - float(lower)) + float(lower)
    r = torch.where(self < 0, slopes.to(self.dtype), torch.ones_like(self))
    noise.copy_(r.reshape(noise.shape) if noise.numel() == r.numel() else r)
    return self * r


@register("rrelu_with_noise.out")
def rrelu_with_noise_out(self, noise, lower=0.125, upper=1.0 / 3.0, training=False, generator=None, *, out):
    """aten.rrelu_with_noise (out=)."""
    return write_out(out, rrelu_with_noise(self, noise, lower, upper, training, generator))


@register("rrelu_with_noise_")
def rrelu_with_noise_inplace(self, noise, lower=0.125, upper=1.0 / 3.0, training=False, generator=None):
    """aten.rrelu_with_noise_."""
    return self.copy_(rrelu_with_noise(self, noise, lower, upper, training, generator))
