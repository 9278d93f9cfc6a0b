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


def tiny_llama():
    import transformers

    config = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=1, vocab_size=128,
                                      max_position_embeddings=64)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config)


def text_qwen2():
    """tests/language_models.py's tiny Qwen2, over the vocabulary of its trained tokenizer."""
    from tests.language_models import make_model, make_tokenizer

    return make_model("qwen2", make_tokenizer("qwen2"))
