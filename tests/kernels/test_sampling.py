"""The device sampler (kernels/sampling.py) against transformers' warpers: greedy is argmax, top-k=1 is
greedy, filtered tokens are never drawn, and draw frequencies match the filtered softmax."""

import pytest
import torch
from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper

from torch_webgpu.kernels.sampling import SampleProblem, check_problem, sample_launch

from .helpers import TORCH, run_launch


def _sample(rt, logits, mode="logits", samples=1, rng=(7, 0, 0, 0), dtype="f32", **kw):
    rows, n = logits.shape
    problem = SampleProblem(mode, dtype, rows, n, num_samples=samples, **kw)
    out = torch.zeros(rows, samples, dtype=torch.int32)
    return run_launch(rt, sample_launch(problem, rng), {"x": logits.to(TORCH[dtype]).contiguous()}, out)


def _filtered_probs(logits, temperature=1.0, top_k=0, top_p=1.0):
    scores = logits / temperature
    if top_k:
        scores = TopKLogitsWarper(top_k)(None, scores)
    if top_p < 1.0:
        scores = TopPLogitsWarper(top_p)(None, scores)
    return torch.softmax(scores, dim=-1)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_greedy_is_first_argmax(webgpu, caps, dtype):
    if dtype == "f16" and not caps.shader_f16:
        pytest.skip("no shader-f16")
    from torch_webgpu.runtime import get_runtime

    logits = torch.randn(3, 1000, generator=torch.Generator().manual_seed(0))
    logits[1, 10] = logits[1, 700] = 9.0         # a tie goes to the first index
    logits[2, 5] = float("nan")                  # NaN is the maximum (torch.argmax)
    got = _sample(get_runtime(), logits, "greedy", dtype=dtype)
    assert got[:, 0].tolist() == torch.argmax(logits.to(TORCH[dtype]), dim=-1).tolist() == \
        [int(torch.argmax(logits[0])), 10, 5]


def test_top_k_one_is_greedy(webgpu):
    from torch_webgpu.runtime import get_runtime

    logits = torch.randn(4, 5000, generator=torch.Generator().manual_seed(1))
    got = _sample(get_runtime(), logits, samples=16, temperature=0.7, top_k=1, top_p=0.9)
    assert (got == torch.argmax(logits, dim=-1, keepdim=True).int()).all()


@pytest.mark.parametrize("top_k, top_p", [(20, 1.0), (0, 0.5), (50, 0.8)])
def test_filtered_tokens_are_never_drawn(webgpu, top_k, top_p):
    from torch_webgpu.runtime import get_runtime

    logits = 3 * torch.randn(2, 3000, generator=torch.Generator().manual_seed(2))
    kept = _filtered_probs(logits, 0.8, top_k, top_p) > 0
    got = _sample(get_runtime(), logits, samples=512, temperature=0.8, top_k=top_k, top_p=top_p)
    for row in range(2):
        assert kept[row, got[row].long()].all()
        assert len(set(got[row].tolist())) > 1   # still a distribution, not one token


@pytest.mark.parametrize("temperature, top_k, top_p", [(1.0, 0, 1.0), (0.5, 0, 1.0), (1.3, 5, 0.9)])
def test_frequencies_match_filtered_softmax(webgpu, temperature, top_k, top_p):
    from torch_webgpu.runtime import get_runtime

    logits = torch.tensor([[1.0, 0.2, -0.5, 2.0, 0.0, 1.5, -2.0, 0.7]])
    want = _filtered_probs(logits, temperature, top_k, top_p)[0]
    draws = 20000
    got = _sample(get_runtime(), logits, samples=draws, rng=(123, 4, 5, 0), temperature=temperature,
                  top_k=top_k, top_p=top_p)
    freq = torch.bincount(got[0].long(), minlength=8).float() / draws
    # 20000 draws: a frequency's standard deviation is at most 0.0035, so 0.015 is over 4 sigma
    torch.testing.assert_close(freq, want, atol=0.015, rtol=0)
    assert (freq[want == 0] == 0).all()


def test_probs_mode_and_seeds(webgpu):
    from torch_webgpu.runtime import get_runtime

    rt = get_runtime()
    probs = torch.tensor([[0.0, 0.25, 0.0, 0.75]])
    a = _sample(rt, probs, "probs", samples=4000, rng=(1, 0, 0, 0))
    assert set(a[0].tolist()) == {1, 3}
    assert abs((a[0] == 3).float().mean().item() - 0.75) < 0.03
    assert torch.equal(a, _sample(rt, probs, "probs", samples=4000, rng=(1, 0, 0, 0)))  # seeded: repeats
    assert not torch.equal(a, _sample(rt, probs, "probs", samples=4000, rng=(1, 0, 1, 0)))  # next offset


@pytest.mark.parametrize("bad, message", [
    (dict(mode="beam"), "mode 'beam'"), (dict(temperature=0.0), "temperature"),
    (dict(top_p=1.5), "top_p"), (dict(dtype="i32"), "dtype i32"), (dict(rows=0), "rows"),
])
def test_bad_problems_are_named(bad, message):
    args = dict(mode="logits", dtype="f32", rows=1, n=8) | bad
    with pytest.raises(ValueError, match=message):
        check_problem(SampleProblem(**args))
