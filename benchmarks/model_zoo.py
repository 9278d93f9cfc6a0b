"""Benchmark models with random weights (no downloads): full size, or tiny for smoke runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn


class BasicBlock(nn.Module):
    """ResNet's two-conv residual block."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class ResNet18(nn.Module):
    """ResNet-18's shape (torchvision does not install beside torch 2.13, so it is written here)."""

    def __init__(self, width: int = 64, classes: int = 1000):
        super().__init__()
        w = width
        self.stem = nn.Sequential(nn.Conv2d(3, w, 7, 2, 3, bias=False), nn.BatchNorm2d(w), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        layers, cin = [], w
        for i, cout in enumerate([w, 2 * w, 4 * w, 8 * w]):
            stride = 1 if i == 0 else 2
            layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.head = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(x))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


@dataclass
class ModelCase:
    """A model, its example inputs and how many items (images, tokens) one call processes."""

    name: str
    build: Callable[[], nn.Module]
    inputs: Callable[[], tuple[torch.Tensor, ...]]
    items: int
    item_unit: str


def _mlp(tiny: bool) -> ModelCase:
    d = 64 if tiny else 1024
    b = 8 if tiny else 256

    def build():
        return nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.GELU(), nn.Linear(d, d))

    return ModelCase("MLP", build, lambda: (torch.randn(b, d),), b, "rows/s")


def _resnet(tiny: bool) -> ModelCase:
    size = 32 if tiny else 224
    return ModelCase("ResNet-18 (batch 1)", lambda: ResNet18(8 if tiny else 64, 10 if tiny else 1000),
                     lambda: (torch.randn(1, 3, size, size),), 1, "images/s")


def _gpt2(tiny: bool) -> ModelCase:
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = (GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=128, n_positions=64) if tiny
           else GPT2Config())  # GPT-2 small: 12 layers, 768 wide, 50257 vocab
    seq = 8 if tiny else 128

    def build():
        model = GPT2LMHeadModel(cfg)
        model.config.use_cache = False
        return _LogitsOnly(model)

    return ModelCase(f"GPT-2{' tiny' if tiny else ' small'} prefill ({seq} tokens)", build,
                     lambda: (torch.randint(0, cfg.vocab_size, (1, seq)),), seq, "tokens/s")


def _gpt2_decode(tiny: bool) -> ModelCase:
    from transformers import GPT2Config, GPT2LMHeadModel

    from .gpt2_decode import GPT2StaticDecode, decode_inputs

    cfg = (GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=128, n_positions=64) if tiny
           else GPT2Config())
    max_len = 16 if tiny else 256

    def build():
        return GPT2StaticDecode(GPT2LMHeadModel(cfg), max_len)

    # One token per call at position max_len/2 of a static cache: tokens/s is decode speed.
    return ModelCase(f"GPT-2{' tiny' if tiny else ' small'} decode (KV cache {max_len})", build,
                     lambda: decode_inputs(cfg, max_len, max_len // 2), 1, "tokens/s")


def _bert(tiny: bool) -> ModelCase:
    from transformers import BertConfig, BertModel

    cfg = (BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=2, intermediate_size=128,
                      vocab_size=128) if tiny else BertConfig())
    seq = 8 if tiny else 128
    return ModelCase(f"BERT-{'tiny' if tiny else 'base'} encoder ({seq} tokens)",
                     lambda: _LogitsOnly(BertModel(cfg)),
                     lambda: (torch.randint(0, cfg.vocab_size, (1, seq)),), seq, "tokens/s")


def _bert_f16(tiny: bool) -> ModelCase:
    """BERT in float16 (issue 12: an f16 model compiled for the GPU; needs shader-f16)."""
    case = _bert(tiny)
    return ModelCase(case.name.replace("encoder", "encoder f16"), lambda: case.build().half(), case.inputs,
                     case.items, case.item_unit)


def _vit(tiny: bool) -> ModelCase:
    from transformers import ViTConfig, ViTModel

    cfg = (ViTConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=2, intermediate_size=128,
                     image_size=32, patch_size=16) if tiny else ViTConfig())
    return ModelCase(f"ViT-{'tiny' if tiny else 'B/16'} (batch 1)", lambda: _LogitsOnly(ViTModel(cfg)),
                     lambda: (torch.randn(1, 3, cfg.image_size, cfg.image_size),), 1, "images/s")


def _hf_cnn(name: str, tiny: bool) -> ModelCase:
    """A small transformers CNN (issue 12's compile-time models): the config's depths at 16-128 channels,
    64x64, random weights; tiny (smoke): 8-16 channels at 32x32, one block per stage."""
    import transformers as tf

    size = 32 if tiny else 64
    widths = [8, 16] if tiny else [16, 32, 64, 128]
    # the configs' own depths (ResNet-34's and ConvNeXt-T's); tiny: one block per stage
    depths = [1, 1] if tiny else {"ResNet": [3, 4, 6, 3], "ConvNeXt": [3, 3, 9, 3]}.get(name)
    if name == "ResNet":
        cfg = tf.ResNetConfig(embedding_size=widths[0], hidden_sizes=widths, depths=depths,
                              layer_type="basic", num_labels=10)
        cls = tf.ResNetForImageClassification
    elif name == "ConvNeXt":
        cfg = tf.ConvNextConfig(hidden_sizes=widths, depths=depths, num_stages=len(widths), image_size=size,
                                num_labels=10)
        cls = tf.ConvNextForImageClassification
    else:   # MobileNetV2 at depth multiplier 0.35 (16...112 channels), the last conv narrowed too
        cfg = tf.MobileNetV2Config(depth_multiplier=0.25 if tiny else 0.35, image_size=size,
                                   finegrained_output=False, num_labels=10)
        cls = tf.MobileNetV2ForImageClassification
    def build():
        model = cls(cfg)
        for module in model.modules():
            # transformers' init (normal, std 0.02) makes MobileNetV2's logits ~1e-25: no check at all
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, nonlinearity="relu")
        return _LogitsOnly(model)

    return ModelCase(f"{name}{'-tiny' if tiny else ''} ({size}x{size})", build,
                     lambda: (torch.randn(1, 3, size, size),), 1, "images/s")


CNN_NAMES = ("ResNet", "ConvNeXt", "MobileNetV2")


def cnn_cases(tiny: bool) -> list[ModelCase]:
    """Issue 12's small transformers CNNs (ResNet, ConvNeXt, MobileNetV2 configs), for compile time."""
    return [_hf_cnn(name, tiny) for name in CNN_NAMES]


# int4 first: issue 14's headline figures; the first figure of a run has measured slower on the H200
# (h200-2026-12-01-llm-run3.md: the same kernels 3x slower in the first model's plan), so the order is
# part of what a run's report says
LLAMA_WEIGHTS = ("int4", "f16", "int8")


def _quantize_llama(lm: nn.Module, weights: str) -> nn.Module:
    """The model in f16, or with torchao weight-only weights the way ExecuTorch's Llama 3 export quantizes
    it (examples/models/llama README: `-qmode 8da4w --group_size G --embedding-quantize 4,32`, the table
    quantized "due to the larger vocabulary size of Llama3", the output layer being one of the linears
    -qmode quantizes; int8: `-qmode int8`, per-channel linears, with `--embedding-quantize 8,0`, per-row),
    weight-only and with the issue's group 32: every linear, the LM head included, and the token
    embedding, int4: IntxWeightOnlyConfig(int4, PerGroup(32)); int8: Int8WeightOnlyConfig (per-channel,
    i.e. per row of the table). One config for the tied embedding / LM head makes their two quantized
    tensors bit-identical, so a plan's executor keeps one device copy for both (quant_embedding gathers
    rows of it, quant_matmul streams it as the head)."""
    lm = lm.half()
    if weights == "f16":
        return lm
    from torchao.quantization import Int8WeightOnlyConfig, IntxWeightOnlyConfig, quantize_
    from torchao.quantization.granularity import PerGroup

    config = (Int8WeightOnlyConfig() if weights == "int8"
              else IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32)))
    quantize_(lm, config, filter_fn=lambda m, fqn: isinstance(m, (nn.Linear, nn.Embedding)))
    return lm


class _LastLogits(nn.Module):
    """A causal LM's logits at the last position only (a prefill's output: the next token's)."""

    def __init__(self, lm: nn.Module):
        super().__init__()
        self.lm = lm

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        hidden = self.lm.model(ids).last_hidden_state
        return self.lm.lm_head(hidden[:, -1:])


def _llama(tiny: bool, weights: str, phase: str) -> ModelCase:
    """Llama-3.2-1B-shaped (random weights) prefill of a 1,024-token prompt, or one decode step at 2,048
    context over a static KV cache (llama_decode.py), in f16 / int8 / int4 weights."""
    from transformers import LlamaForCausalLM

    from .llama_decode import LlamaStaticDecode, decode_inputs, llama_1b_config

    cfg = llama_1b_config(tiny)
    cfg.use_cache = False
    name = f"Llama-3.2-1B{'-tiny' if tiny else ''} {weights}"
    if phase == "prefill":
        seq = 8 if tiny else 1024
        return ModelCase(f"{name} prefill ({seq} tokens)",
                         lambda: _LastLogits(_quantize_llama(LlamaForCausalLM(cfg), weights)),
                         lambda: (torch.randint(0, cfg.vocab_size, (1, seq)),), seq, "tokens/s")
    max_len = 16 if tiny else 2048
    return ModelCase(f"{name} decode (KV cache {max_len})",
                     lambda: LlamaStaticDecode(_quantize_llama(LlamaForCausalLM(cfg), weights), max_len),
                     lambda: decode_inputs(cfg, max_len, max_len - 1, dtype=torch.float16), 1, "tokens/s")


def llama_cases(tiny: bool) -> list[ModelCase]:
    """The issue-14 language-model figures: Llama-3.2-1B-shaped decode and prefill per weight format."""
    return [_llama(tiny, w, phase) for phase in ("decode", "prefill") for w in LLAMA_WEIGHTS]


class _LogitsOnly(nn.Module):
    """Return the first output tensor of a transformers model (their output objects are not tensors)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.model(x)
        return out[0] if isinstance(out, tuple) else next(iter(out.values()))


def model_cases(tiny: bool) -> list[ModelCase]:
    """Every benchmark model, tiny (smoke) or full size."""
    return [_mlp(tiny), _resnet(tiny), _gpt2(tiny), _gpt2_decode(tiny), _bert(tiny), _bert_f16(tiny),
            _vit(tiny)]
