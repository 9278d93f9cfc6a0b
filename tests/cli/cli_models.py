"""Model factories for `torch-webgpu compile FILE.py:FACTORY` (seeded: the tests rebuild the same weights)."""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the CLI loads this file by path

from tests.compiler.models import MLP, ConvBlock, TransformerBlock  # noqa: E402


def mlp():
    torch.manual_seed(0)
    return MLP()


def conv_block():
    torch.manual_seed(0)
    block = ConvBlock()
    with torch.no_grad():   # non-trivial BatchNorm statistics (eval mode uses them)
        block.bn.running_mean.uniform_(-0.5, 0.5)
        block.bn.running_var.uniform_(0.5, 2.0)
    return block


def transformer_block():
    torch.manual_seed(0)
    return TransformerBlock()


def not_a_module():
    return 42


class _Erfinv(torch.nn.Module):
    def forward(self, x):
        return torch.erfinv(x) * 2


def unsupported_op():
    return _Erfinv()
