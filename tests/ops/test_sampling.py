"""torch.multinomial on the webgpu device (ops/sampling.py): shapes, frequencies, the generator, errors."""

import pytest
import torch


def test_frequencies_and_shape(webgpu):
    probs = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.0, 0.0, 2.0, 0.0]], device=webgpu)
    draws = torch.multinomial(probs, 8000, replacement=True)
    assert draws.device.type == "webgpu" and draws.dtype == torch.int64 and draws.shape == (2, 8000)
    freq = torch.stack([torch.bincount(r, minlength=4) for r in draws.cpu()]).float() / 8000
    torch.testing.assert_close(freq, torch.tensor([[0.1, 0.2, 0.3, 0.4], [0, 0, 1, 0]]), atol=0.02, rtol=0)


def test_one_sample_of_a_vector_and_unnormalised_f16(webgpu):
    probs = torch.tensor([0.0, 3.0, 0.0, 1.0], device=webgpu, dtype=torch.float16)
    one = torch.multinomial(probs, 1)
    assert one.shape == (1,) and one.item() in (1, 3)


def test_without_replacement_draws_distinct_ids(webgpu):
    probs = torch.tensor([0.3, 0.0, 0.3, 0.2, 0.2], device=webgpu)
    ids = torch.multinomial(probs, 4)
    assert sorted(ids.cpu().tolist()) == [0, 2, 3, 4]   # distinct, and never the zero-weight id
    with pytest.raises(RuntimeError, match="without replacement"):
        torch.multinomial(probs, 6)


def test_generator_reproduces_draws(webgpu):
    probs = torch.rand(3, 50, device=webgpu)
    a = torch.multinomial(probs, 20, True, generator=torch.Generator(webgpu).manual_seed(5))
    b = torch.multinomial(probs, 20, True, generator=torch.Generator(webgpu).manual_seed(5))
    c = torch.multinomial(probs, 20, True, generator=torch.Generator(webgpu).manual_seed(6))
    assert torch.equal(a.cpu(), b.cpu()) and not torch.equal(a.cpu(), c.cpu())
    torch.manual_seed(1)
    d = torch.multinomial(probs, 20, True)
    e = torch.multinomial(probs, 20, True)   # the default generator moved on
    assert not torch.equal(d.cpu(), e.cpu())


@pytest.mark.parametrize("args, message", [
    ((torch.ones(2, 2, 2), 1), "1-D or 2-D"), ((torch.ones(4, dtype=torch.int32), 1), "floating-point"),
    ((torch.ones(4), 0), "n_sample <= 0"),
])
def test_errors_are_torch_like(webgpu, args, message):
    with pytest.raises(RuntimeError, match=message):
        torch.multinomial(args[0].to(webgpu), *args[1:])
