"""torch.multinomial on the device (the draw of transformers' sampled `generate`): the kernel library's
sampler (kernels/sampling.py) reads the probability rows where they are and writes the int64 ids, so a
decode loop's probabilities never leave the device. Its uniforms are Philox draws keyed by the webgpu
generator, like every other random op (ops/random.py).

Without replacement and more than one sample, the ids are torch's own construction on the device: the
top `num_samples` of p / E with E ~ Exp(1) (equivalent to successive draws without replacement).
"""

from __future__ import annotations

import torch

from ..kernels.sampling import MAX_ROWS, SampleProblem, sample_launch
from .library_launch import device_caps, record_launch
from .random import philox_words
from .registry import register

_SCORES = {torch.float32: "f32", torch.float16: "f16"}


def _check(self: torch.Tensor, num_samples: int, replacement: bool) -> None:
    if self.dim() not in (1, 2) or self.numel() == 0:
        raise RuntimeError(f"multinomial: probabilities must be a non-empty 1-D or 2-D tensor, got shape "
                           f"{list(self.shape)}")
    if not self.is_floating_point():
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: {self.dtype}")
    if num_samples <= 0:
        raise RuntimeError("multinomial: cannot sample n_sample <= 0 samples")
    if not replacement and num_samples > self.shape[-1]:
        raise RuntimeError("multinomial: cannot sample n_sample > prob_dist.size(-1) samples without "
                           "replacement")


def _draw(probs: torch.Tensor, num_samples: int, generator: torch.Generator | None) -> torch.Tensor:
    """`num_samples` ids per row, with replacement, as an int64 [rows, num_samples] tensor."""
    rows, n = probs.shape
    out = torch.empty((rows, num_samples), dtype=torch.int64, device=probs.device)
    dtype = _SCORES.get(probs.dtype)
    if dtype is None or (dtype == "f16" and not device_caps().shader_f16):
        probs, dtype = probs.float(), "f32"
    probs = probs.contiguous()
    rng = tuple(philox_words(generator))
    for start in range(0, rows, MAX_ROWS):
        count = min(MAX_ROWS, rows - start)
        problem = SampleProblem("probs", dtype, count, n, offset=probs.storage_offset() + start * n,
                                out_offset=start * num_samples, out_words=2, num_samples=num_samples)
        record_launch(sample_launch(problem, rng), {"x": probs, "out": out})
    return out


@register("multinomial")
def multinomial(self: torch.Tensor, num_samples: int, replacement: bool = False, *,
                generator: torch.Generator | None = None) -> torch.Tensor:
    """torch.multinomial on the device: ids drawn in proportion to each row's non-negative weights."""
    _check(self, num_samples, replacement)
    rows = self.reshape(1, -1) if self.dim() == 1 else self
    if replacement or num_samples == 1:
        out = _draw(rows, num_samples, generator)
    else:
        noise = torch.empty_like(rows, dtype=torch.float32).exponential_(1.0, generator=generator)
        out = torch.topk(rows.float() / noise, num_samples, dim=-1).indices
    return out.reshape(num_samples) if self.dim() == 1 else out


@register("multinomial.out")
def multinomial_out(self: torch.Tensor, num_samples: int, replacement: bool = False, *,
                    generator: torch.Generator | None = None, out: torch.Tensor) -> torch.Tensor:
    """torch.multinomial(..., out=) on the device."""
    result = multinomial(self, num_samples, replacement, generator=generator)
    out.resize_(result.shape)
    out.copy_(result)
    return out
