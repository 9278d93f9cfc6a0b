"""Training through AOTAutograd: compiled gradients and SGD steps match eager CPU."""

import copy

import pytest
import torch

from .models import MLP


def test_mlp_three_sgd_steps_match_eager():
    torch.manual_seed(0)
    eager = MLP()
    compiled_model = copy.deepcopy(eager)
    compiled = torch.compile(compiled_model, backend="webgpu")
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.1)
    opt_c = torch.optim.SGD(compiled_model.parameters(), lr=0.1)
    for step in range(3):
        x, target = torch.randn(4, 16), torch.randn(4, 8)
        for model, opt in ((eager, opt_e), (compiled, opt_c)):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), target).backward()
            opt.step()
        for (name, pe), pc in zip(eager.named_parameters(), compiled_model.parameters(), strict=False):
            torch.testing.assert_close(pc.grad, pe.grad, atol=1e-4, rtol=1e-4, msg=f"{name} step {step}")
            torch.testing.assert_close(pc.detach(), pe.detach(), atol=1e-4, rtol=1e-4)


def test_mlp_training_on_the_webgpu_device():
    torch.manual_seed(0)
    eager = MLP()
    model = copy.deepcopy(eager).to("webgpu")
    compiled = torch.compile(model, backend="webgpu")
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.1)
    opt_d = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x, target = torch.randn(4, 16), torch.randn(4, 8)
        opt_e.zero_grad()
        torch.nn.functional.mse_loss(eager(x), target).backward()
        opt_e.step()
        opt_d.zero_grad()
        torch.nn.functional.mse_loss(compiled(x.to("webgpu")), target.to("webgpu")).backward()
        opt_d.step()
        for (name, pe), pd in zip(eager.named_parameters(), model.parameters(), strict=True):
            assert pd.device.type == "webgpu" and pd.grad.device.type == "webgpu"
            torch.testing.assert_close(pd.grad.cpu(), pe.grad, atol=1e-4, rtol=1e-4, msg=f"{name} {step}")
            torch.testing.assert_close(pd.detach().cpu(), pe.detach(), atol=1e-4, rtol=1e-4)


@pytest.mark.slow
def test_transformer_block_gradients_match_eager():
    from .models import TransformerBlock

    torch.manual_seed(0)
    eager = TransformerBlock()
    compiled_model = copy.deepcopy(eager)
    x = torch.randn(2, 8, 32)
    out = torch.compile(compiled_model, backend="webgpu")(x)
    expected = eager(x)
    torch.testing.assert_close(out, expected, atol=1e-4, rtol=1e-4)
    out.pow(2).mean().backward()
    expected.pow(2).mean().backward()
    for (name, pe), pc in zip(eager.named_parameters(), compiled_model.parameters(), strict=True):
        torch.testing.assert_close(pc.grad, pe.grad, atol=1e-4, rtol=1e-4, msg=name)
