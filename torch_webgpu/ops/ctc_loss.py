"""CTC loss forward: the alpha recursion over time, every step one batch of device elementwise ops over
(batch, 2 * max_target_length + 1) states, with the CPU's log-sum-exp formula (max-shifted, -inf -> 0)."""

from __future__ import annotations

import torch

from .registry import register

_NEG_INF = float("-inf")


def _shift(x: torch.Tensor, k: int) -> torch.Tensor:
    """x moved k states right along the last dim, -inf filling the first k."""
    pad = torch.full((*x.shape[:-1], k), _NEG_INF, dtype=x.dtype, device=x.device)
    return torch.cat([pad, x[..., :-k]], -1) if x.shape[-1] > k else pad[..., : x.shape[-1]]


def _lse3(a, b, c):
    m = torch.maximum(torch.maximum(a, b), c)
    m = torch.where(m == _NEG_INF, torch.zeros_like(m), m)
    return torch.log(torch.exp(a - m) + torch.exp(b - m) + torch.exp(c - m)) + m


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, zero_infinity=False):
    """aten._ctc_loss -> (neg_log_likelihood (N,), log_alpha (N, T, 2 * max_len + 1))."""
    if log_probs.dim() != 3:
        raise RuntimeError(f"ctc_loss: expected log_probs of shape (T, N, C), got {list(log_probs.shape)}")
    t_max, n, c = log_probs.shape
    in_lens = [int(v) for v in input_lengths]
    tg_lens = [int(v) for v in target_lengths]
    if len(in_lens) != n or len(tg_lens) != n:
        raise RuntimeError(f"ctc_loss: expected {n} input and target lengths, got {len(in_lens)} and "
                           f"{len(tg_lens)}")
    if any(v > t_max or v < 0 for v in in_lens):
        raise RuntimeError(f"ctc_loss: input lengths must be within 0..{t_max}, got {in_lens}")
    if not 0 <= blank < c:
        raise RuntimeError(f"blank must be in label range, got {blank} for {c} classes")
    max_len = max(tg_lens) if tg_lens else 0
    s_max = 2 * max_len + 1
    dev = log_probs.device
    # padded (N, max_len) labels; 1-D targets are the per-sample targets concatenated
    if targets.dim() == 1:
        starts = [0]
        for v in tg_lens[:-1]:
            starts.append(starts[-1] + v)
        last = max(targets.numel() - 1, 0)
        pos = torch.tensor([[min(s + j, last) for j in range(max_len)] for s in starts],
                           dtype=torch.int64).reshape(n, max_len)
        labels = targets.to(torch.int64).index_select(0, pos.reshape(-1).to(dev)).reshape(n, max_len) \
            if max_len else torch.zeros((n, 0), dtype=torch.int64, device=dev)
    else:
        labels = targets[:, :max_len].to(torch.int64)
    ext = torch.full((n, s_max), blank, dtype=torch.int64, device=dev)
    if max_len:
        ext[:, 1::2] = labels
    # a label may skip the blank before it only when it differs from the label two states back
    skip = torch.zeros((n, s_max), dtype=torch.bool, device=dev)
    if s_max > 2:
        skip[:, 2:] = ext[:, 2:] != ext[:, :-2]
    lp = log_probs.float().gather(2, ext.unsqueeze(0).expand(t_max, n, s_max))  # (T, N, S)
    state = torch.arange(s_max, device=dev)
    tl = torch.tensor(tg_lens, device=dev)
    il = torch.tensor(in_lens, device=dev)
    if t_max:
        first = torch.where((state == 0) | ((state == 1) & (tl > 0).unsqueeze(1)), lp[0], _NEG_INF)
    else:
        first = torch.full((n, s_max), _NEG_INF, device=dev)
    alpha = torch.where((il > 0).unsqueeze(1), first, torch.full_like(first, _NEG_INF))
    steps = [alpha]
    for t in range(1, max(in_lens, default=0)):
        a3 = torch.where(skip, _shift(alpha, 2), torch.full_like(alpha, _NEG_INF))
        new = _lse3(alpha, _shift(alpha, 1), a3) + lp[t]
        live = (il > t).unsqueeze(1)
        steps.append(torch.where(live, new, torch.full_like(new, _NEG_INF)))
        alpha = torch.where(live, new, alpha)
    while len(steps) < t_max:
        steps.append(torch.full((n, s_max), _NEG_INF, device=dev))
    log_alpha = torch.stack(steps, 1) if steps else torch.empty((n, 0, s_max), device=dev)
    end = (2 * tl).unsqueeze(1)
    l1 = alpha.gather(1, end).squeeze(1)
    l2 = torch.where(tl > 0, alpha.gather(1, (end - 1).clamp_min(0)).squeeze(1), _NEG_INF)
    m = torch.maximum(l1, l2)
    m = torch.where(m == _NEG_INF, torch.zeros_like(m), m)
    nll = -(torch.log(torch.exp(l1 - m) + torch.exp(l2 - m)) + m)
    if zero_infinity:
        nll = torch.where(nll == float("inf"), torch.zeros_like(nll), nll)
    return nll.to(log_probs.dtype), log_alpha.to(log_probs.dtype)


register("_ctc_loss")(ctc_loss)


@register("_ctc_loss.Tensor")
def ctc_loss_tensor(log_probs, targets, input_lengths, target_lengths, blank=0, zero_infinity=False):
    """aten._ctc_loss with length tensors (read back: they size the recursion)."""
    return ctc_loss(log_probs, targets, input_lengths.cpu().tolist(), target_lengths.cpu().tolist(), blank,
                    zero_infinity)
