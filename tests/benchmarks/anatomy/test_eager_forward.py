"""benchmarks/anatomy/eager_forward: the per-forward counts of an eager model, on a conv / batch norm / pool /
linear block and an embedding / layer norm block (the ResNet and BERT paths): nothing waits, reads back,
uploads, falls back to the CPU or runs unplanned, and each op is one replayed dispatch."""

import torch
from torch import nn

import torch_webgpu  # noqa: F401  (registers the device)
from benchmarks.anatomy.eager_forward import forward_counts


class _Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        y = nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
        return self.head(y.mean((2, 3)))


class _Text(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.norm = nn.Embedding(16, 8), nn.LayerNorm(8)

    def forward(self, ids):
        return self.norm(self.emb(ids))


def test_eager_forwards_make_no_round_trips():
    torch.manual_seed(0)
    cases = ((_Cnn(), torch.randn(1, 3, 8, 8), 6), (_Text(), torch.randint(0, 16, (2, 5)), 2))
    for model, x, dispatches in cases:
        model = model.eval()
        want = model(x)
        placed = model.to("webgpu")
        counts = forward_counts(placed, (x.to("webgpu"),), reps=2)
        assert counts["dispatches"] == dispatches  # eval batch norm is one dispatch
        for what in ("waits", "uploads", "readbacks", "fallbacks", "unplanned calls"):
            assert counts[what] == 0, what
        assert counts["plan replays"] > 0 and counts["host ms"] > 0
        with torch.no_grad():
            torch.testing.assert_close(placed(x.to("webgpu")).cpu(), want.detach(), rtol=1e-4, atol=1e-4)
