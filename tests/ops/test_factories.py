"""Device factories (ops/factories.py) beyond OpInfo's small samples: logspace keeps f32 accuracy over
wide exponent ranges (the exponent is summed exactly, then one exp2 of a fraction), and saturates."""

import pytest
import torch


@pytest.mark.parametrize("args", [(0, 10, 1000), (-40, 38, 777), (10, -10, 33, 3.0), (-3, 50, 200, 2.0)],
                         ids=str)
def test_logspace_accuracy(webgpu, args):
    got, want = torch.logspace(*args, device=webgpu).cpu().double(), torch.logspace(*args).double()
    assert ((got - want).abs() / want).max().item() < 5e-7   # ~4 f32 ulp


def test_logspace_saturates_and_steps_of_one(webgpu):
    torch.testing.assert_close(torch.logspace(0, 200, 50, device=webgpu).cpu(), torch.logspace(0, 200, 50))
    torch.testing.assert_close(torch.logspace(-200, 0, 9, 2.0, device=webgpu).cpu(),
                               torch.logspace(-200, 0, 9, 2.0))
    torch.testing.assert_close(torch.logspace(1.5, 9, 1, device=webgpu).cpu(), torch.logspace(1.5, 9, 1))
    torch.testing.assert_close(torch.linspace(-3, 0, 1, device=webgpu).cpu(), torch.linspace(-3, 0, 1))


def test_logspace_rejects_non_positive_base(webgpu):
    with pytest.raises(NotImplementedError, match="positive base"):
        torch.logspace(0, 1, 3, -2.0, device=webgpu)
