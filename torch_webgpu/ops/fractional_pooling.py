"""fractional_max_pool2d / 3d (+backward) for given random_samples (F.fractional_max_pool* draws them
with the device RNG): window starts from the CPU's interval formula, then a strict-'>' running max over the
window offsets (NaN wins), gathered from the flat input plane."""

from __future__ import annotations

import itertools

import torch

from .out_args import write_out
from .registry import register


def _starts(u: torch.Tensor, in_size: int, out_size: int, pool: int) -> torch.Tensor:
    """(N, C, out_size) window starts: trunc((i + u) * alpha) - trunc(u * alpha), the last at in - pool."""
    i = torch.arange(out_size, dtype=torch.float32, device=u.device)
    if out_size > 1:
        # divided in float32, as the CPU does
        alpha = float(torch.tensor(in_size - pool, dtype=torch.float32) / (out_size - 1))
        s = torch.trunc((i + u.unsqueeze(-1)) * alpha) - torch.trunc(u.unsqueeze(-1) * alpha)
    else:
        s = torch.zeros((*u.shape, out_size), device=u.device)
    last = torch.full_like(s[..., :1], float(in_size - pool))
    return torch.cat([s[..., :-1], last], -1).to(torch.int32) if out_size else s.to(torch.int32)


def _fractional(self, kernel_size, output_size, random_samples, k: int, op: str):
    if self.dim() not in (k + 1, k + 2):
        raise RuntimeError(f"{op}: expected a {k + 1}-D or {k + 2}-D input, got {self.dim()}-D")
    batched = self.dim() == k + 2
    x = self if batched else self.unsqueeze(0)
    n, c = x.shape[:2]
    sizes = list(x.shape[2:])
    for d in range(k):
        if output_size[d] + kernel_size[d] - 1 > sizes[d]:
            raise RuntimeError(f"{op}: out size {output_size[d]} too large for input {sizes[d]} and pool "
                               f"{kernel_size[d]}")
    u = random_samples.float()
    # sample component j: 2-d uses (W, H), 3-d uses (T, H, W)
    comp = [1, 0] if k == 2 else [0, 1, 2]
    starts = [_starts(u[:, :c, comp[d]], sizes[d], output_size[d], kernel_size[d]) for d in range(k)]
    flat = x.reshape(n, c, -1)
    best = None
    best_idx = None
    for offs in itertools.product(*(range(kk) for kk in kernel_size)):
        lin = None
        for d in range(k):
            coord = starts[d] + offs[d]
            coord = coord.reshape(n, c, *([1] * d), output_size[d], *([1] * (k - 1 - d)))
            lin = coord if lin is None else lin * sizes[d] + coord
        lin = lin.expand(n, c, *output_size).reshape(n, c, -1)
        v = flat.gather(2, lin.to(torch.int64))
        if best is None:
            best, best_idx = v, lin
            continue
        take = (v > best) | torch.isnan(v)
        best = torch.where(take, v, best)
        best_idx = torch.where(take, lin, best_idx)
    out = best.reshape(n, c, *output_size)
    idx = best_idx.to(torch.int64).reshape(n, c, *output_size)
    if not batched:
        out, idx = out.squeeze(0), idx.squeeze(0)
    return out, idx


def _register(k: int) -> None:
    name = f"fractional_max_pool{k}d"

    def forward(self, kernel_size, output_size, random_samples):
        """aten fractional_max_pool forward -> (output, indices)."""
        return _fractional(self, list(kernel_size), list(output_size), random_samples, k, name)

    def forward_out(self, kernel_size, output_size, random_samples, *, output, indices):
        """aten fractional_max_pool forward (out=)."""
        o, i = forward(self, kernel_size, output_size, random_samples)
        return write_out(output, o), write_out(indices, i)

    def backward(grad_output, self, kernel_size, output_size, indices):
        """aten fractional_max_pool backward: gradients scattered to the argmax positions."""
        nlead = self.dim() - k
        g = grad_output.reshape(*self.shape[:nlead], -1).float()
        idx = indices.reshape(*self.shape[:nlead], -1)
        plane = 1
        for s in self.shape[nlead:]:
            plane *= s
        acc = torch.zeros((*self.shape[:nlead], plane), dtype=torch.float32, device=self.device)
        acc.scatter_add_(acc.dim() - 1, idx, g)
        return acc.reshape(self.shape).to(self.dtype)

    def backward_out(grad_output, self, kernel_size, output_size, indices, *, grad_input):
        """aten fractional_max_pool backward (out=)."""
        return write_out(grad_input, backward(grad_output, self, kernel_size, output_size, indices))

    register(name)(forward)
    register(f"{name}.output")(forward_out)
    register(f"{name}_backward")(backward)
    register(f"{name}_backward.grad_input")(backward_out)


_register(2)
_register(3)
