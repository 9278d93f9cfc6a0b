"""Tiny language models with their own tokenizers, built seeded and offline (no downloads): a byte-level BPE
trained in process with `tokenizers` on a small multilingual corpus, wrapped as a transformers fast
tokenizer with special tokens and a chat template, and a random-weight Llama or Qwen2 over its vocabulary,
exported as decode bundles that carry the tokenizer.

Shared by the Python loader's tests (tests/bundle/conftest.py's session fixtures) and the web tests
(torch-webgpu.js runs the same bundles): call `build_language_model(kind, quant, directory)`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

KINDS = ("llama", "qwen2")
QUANTS = ("f32", "int4")
MAX_LEN = 64
PROMPT_BUCKETS = (8, 48)
VOCAB_SIZE = 420   # the trainer's target; the vocabulary is what the corpus allows, the model's is the same

# Accents, CJK and emoji, so that byte-level tokens split multi-byte characters and merges join them.
CORPUS = [
    "Hello world! The quick brown fox jumps over the lazy dog.",
    "Le café crème est très bon, n'est-ce pas ? Où est la gare ? Voilà, déjà fini.",
    "Grüße aus München: Äpfel, Öl und Übermut schmecken süß.",
    "¿Qué tal? El niño comió piña en la mañana. Ça va très bien.",
    "你好，世界！我们今天学习中文。天气很好，我们去公园吧。",
    "こんにちは世界。東京は大きい都市です。ありがとう！",
    "안녕하세요 세계. 한국어도 조금 있어요.",
    "Emoji time 🙂 🚀 🎉 👍🏽 ❤️ 🐍 and more 🙂🙂 fun.",
    "Ελληνικά γράμματα: αβγδε. Русский текст: привет, мир!",
    "Numbers 0123456789, symbols @#$%^&*()[]{} and quotes \"like this\" or 'this'.",
    "A tiny model talks in a web page; tokens stream one by one.",
    "User: How are you?\nAssistant: I am fine, thank you.\n",
    "system user assistant: system prompt, user message, assistant reply. Hello, how can I help you?",
]

LLAMA_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                  "<|eot_id|>", "<|pad|>"]
QWEN2_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

# Llama-3-like: the bos token as a template variable, `trim`, a raise_exception on a bad role.
LLAMA_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] not in ['system', 'user', 'assistant'] %}"
    "{{ raise_exception('Only system, user and assistant roles are supported') }}"
    "{% endif %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim "
    "+ '<|eot_id|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)

# ChatML-like (Qwen2): block tags on their own lines (trim_blocks / lstrip_blocks matter), tools through
# `tojson`, a namespace.
QWEN2_TEMPLATE = """\
{% set ns = namespace(system=false) %}
{% if tools %}
<|im_start|>system
{% for tool in tools %}
{{ tool | tojson }}
{% endfor %}
<|im_end|>
{% endif %}
{% for message in messages %}
    {% if message.role not in ['system', 'user', 'assistant'] %}
        {{ raise_exception('Only system, user and assistant roles are supported') }}
    {% endif %}
    {% if message.role == 'system' %}{% set ns.system = true %}{% endif %}
<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endfor %}
{% if add_generation_prompt %}
<|im_start|>assistant
{% endif %}"""


@dataclass
class LanguageModel:
    """A tiny causal LM, its tokenizer and (once exported) its decode bundle."""

    kind: str
    quant: str
    model: Any        # transformers LlamaForCausalLM / Qwen2ForCausalLM (torchao int4 linears for "int4")
    tokenizer: Any    # transformers.PreTrainedTokenizerFast
    path: Path | None = None


@functools.cache
def _trained_tokenizer_json(kind: str) -> str:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    specials = LLAMA_SPECIALS if kind == "llama" else QWEN2_SPECIALS
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS * 4, trainer=trainer)
    if kind == "llama":   # Llama adds its bos token to every encoded text (Qwen2 adds nothing)
        bos = specials[0]
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, tok.token_to_id(bos))])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok.to_str()


def train_tokenizer(kind: str) -> Any:
    """A byte-level BPE (`tokenizers.Tokenizer`) trained on CORPUS with `kind`'s special tokens."""
    from tokenizers import Tokenizer

    if kind not in KINDS:
        raise ValueError(f"kind {kind!r} is not one of {KINDS}")
    return Tokenizer.from_str(_trained_tokenizer_json(kind))


def make_tokenizer(kind: str) -> Any:
    """`kind`'s trained tokenizer as a transformers fast tokenizer with bos/eos/pad and a chat template."""
    import transformers

    if kind == "llama":
        tokens = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "pad_token": "<|pad|>"}
        template = LLAMA_TEMPLATE
    else:
        tokens = {"bos_token": "<|endoftext|>", "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
        template = QWEN2_TEMPLATE
    return transformers.PreTrainedTokenizerFast(tokenizer_object=train_tokenizer(kind),
                                                chat_template=template, **tokens)


def make_model(kind: str, tokenizer: Any, quant: str = "f32") -> Any:
    """A seeded random-weight Llama or Qwen2 (2 layers, hidden 64) over `tokenizer`'s vocabulary;
    quant "int4": torchao int4 (group 32) weight-only linears, the LM head kept in float32."""
    import transformers

    if quant not in QUANTS:
        raise ValueError(f"quant {quant!r} is not one of {QUANTS}")
    shape = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=len(tokenizer), max_position_embeddings=128)
    ids = dict(bos_token_id=tokenizer.bos_token_id, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    if kind == "llama":
        config = transformers.LlamaConfig(**shape, **ids, eos_token_id=tokenizer.eos_token_id)
        model = transformers.LlamaForCausalLM(config)
        # as Llama 3 instruct: the generation config stops at either end token
        model.generation_config.eos_token_id = [tokenizer.convert_tokens_to_ids("<|end_of_text|>"),
                                                tokenizer.eos_token_id]
    elif kind == "qwen2":
        config = transformers.Qwen2Config(**shape, **ids, eos_token_id=tokenizer.eos_token_id)
        model = transformers.Qwen2ForCausalLM(config)
    else:
        raise ValueError(f"kind {kind!r} is not one of {KINDS}")
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model = model.eval()
    if quant == "int4":
        from torchao.quantization import IntxWeightOnlyConfig, quantize_
        from torchao.quantization.granularity import PerGroup

        quantize_(model, IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32)),
                  filter_fn=lambda m, fqn: isinstance(m, torch.nn.Linear) and fqn != "lm_head")
    return model


def build_language_model(kind: str, quant: str = "f32", directory: str | Path | None = None) -> LanguageModel:
    """`kind`'s tiny model and tokenizer; with `directory`, exported there (portable webgpu-core target,
    MAX_LEN, PROMPT_BUCKETS) as the decode bundle `<kind>-<quant>` carrying the tokenizer."""
    tokenizer = make_tokenizer(kind)
    lm = LanguageModel(kind, quant, make_model(kind, tokenizer, quant), tokenizer)
    if directory is not None:
        import torch_webgpu

        lm.path = torch_webgpu.export_decoder(lm.model, Path(directory) / f"{kind}-{quant}",
                                              tokenizer=tokenizer, max_len=MAX_LEN,
                                              prompt_buckets=PROMPT_BUCKETS, target="webgpu-core")
    return lm


def reference_generate(lm: LanguageModel, prompt_ids: list[int], max_new_tokens: int) -> list[int]:
    """transformers' CPU greedy generate: the prompt and the new tokens."""
    with torch.no_grad():
        out = lm.model.generate(torch.tensor([prompt_ids]), attention_mask=torch.ones(1, len(prompt_ids),
                                dtype=torch.int64), max_new_tokens=max_new_tokens, do_sample=False)
    return out[0].tolist()


def reference_text(lm: LanguageModel, text: str, max_new_tokens: int) -> str:
    """transformers' decoded greedy continuation of `text` (special tokens skipped)."""
    prompt = lm.tokenizer(text)["input_ids"]
    out = reference_generate(lm, prompt, max_new_tokens)
    return lm.tokenizer.decode(out[len(prompt):], skip_special_tokens=True)
