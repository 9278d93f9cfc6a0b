"""Eager training on the webgpu device: an MLP, a small CNN and a tiny transformer, 20 steps of SGD
(momentum) and Adam, losses within 1e-4 (relative) of the identical CPU run, with no op falling back to
the CPU."""

import copy

import pytest
import torch
from torch import nn

import torch_webgpu

STEPS = 20


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 5))


def _cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 8, 3, stride=1), nn.Tanh(), nn.AdaptiveAvgPool2d(2),
        nn.Flatten(), nn.Linear(32, 5),
    )


class _TinyTransformer(nn.Module):
    """Embedding, one encoder layer (attention through scaled_dot_product_attention), head.

    bias=False: an attention key bias has an exactly-zero gradient, and Adam would turn the rounding noise
    of either device into full-size steps on it, making the parameter comparison meaningless.
    """

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 16)
        self.layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True, activation="gelu",
                                                bias=False)
        self.head = nn.Linear(16, 5)

    def forward(self, x):
        return self.head(self.layer(self.emb(x)).mean(1))


def _model(name: str) -> nn.Module:
    return {"mlp": _mlp, "cnn": _cnn, "transformer": _TinyTransformer}[name]()


def _data(model_name: str):
    g = torch.Generator().manual_seed(1)
    if model_name == "mlp":
        x = torch.randn(16, 12, generator=g)
    elif model_name == "cnn":
        x = torch.randn(8, 3, 10, 10, generator=g)
    else:
        x = torch.randint(0, 20, (8, 6), generator=g)
    y = torch.randint(0, 5, (x.shape[0],), generator=g)
    return x, y


def _train(model: nn.Module, opt_name: str, x: torch.Tensor, y: torch.Tensor) -> list[float]:
    if opt_name == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("opt_name", ["sgd", "adam"])
@pytest.mark.parametrize("model_name", ["mlp", "cnn", "transformer"])
def test_training_matches_cpu(webgpu, model_name, opt_name):
    torch.manual_seed(0)
    cpu_model = _model(model_name)
    gpu_model = copy.deepcopy(cpu_model).to(webgpu)
    x, y = _data(model_name)
    cpu_losses = _train(cpu_model, opt_name, x, y)
    gpu_losses = _train(gpu_model, opt_name, x.to(webgpu), y.to(webgpu))
    assert torch_webgpu.fallback_stats() == {}
    assert cpu_losses[-1] < cpu_losses[0]  # it actually trains
    torch.testing.assert_close(torch.tensor(gpu_losses), torch.tensor(cpu_losses), rtol=1e-4, atol=0)
    for p_cpu, p_gpu in zip(cpu_model.parameters(), gpu_model.parameters(), strict=True):
        assert p_gpu.device.type == "webgpu"
        torch.testing.assert_close(p_gpu.detach().cpu(), p_cpu.detach(), rtol=1e-3, atol=1e-4)
