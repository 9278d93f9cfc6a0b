"""A tokenizer as the two files a decode bundle carries: Hugging Face's `tokenizer.json` (the `tokenizers`
model, normalizer, pre-tokenizer, post-processor, decoder and added tokens) and `tokenizer_config.json`
(special tokens, the chat template, decode options) — what `save_pretrained` writes, with a chat template
kept beside it (`chat_template.jinja`) moved into the config's "chat_template", so the pair alone is what
`tokenizers` + jinja2 (Python) and `@huggingface/tokenizers` / transformers.js (JavaScript) read.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

TOKENIZER_JSON = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
_TEMPLATE_FILE = "chat_template.jinja"
_MORE_TEMPLATES = "additional_chat_templates"   # transformers 5: one NAME.jinja per named template
_LEGACY_TEMPLATE_FILE = "chat_template.json"    # older processors: {"chat_template": ...}
_SPECIAL_TOKENS_MAP = "special_tokens_map.json"   # transformers 4 writes the special tokens here too


def _directory_files(directory: Path) -> tuple[bytes, dict[str, Any]]:
    json_path = directory / TOKENIZER_JSON
    if not json_path.is_file():
        raise ValueError(f"tokenizer directory {directory} has no {TOKENIZER_JSON} (a fast tokenizer's "
                         f"file); write one with a transformers fast tokenizer's "
                         f"save_pretrained({str(directory)!r})")
    config: dict[str, Any] = {}
    if (directory / TOKENIZER_CONFIG).is_file():
        config = _read_json(directory / TOKENIZER_CONFIG)
    if (directory / _SPECIAL_TOKENS_MAP).is_file():
        for key, value in _read_json(directory / _SPECIAL_TOKENS_MAP).items():
            config.setdefault(key, value)
    templates: dict[str, str] = {}
    if (directory / _TEMPLATE_FILE).is_file():
        templates["default"] = (directory / _TEMPLATE_FILE).read_text(encoding="utf-8")
    elif (directory / _LEGACY_TEMPLATE_FILE).is_file():
        legacy = _read_json(directory / _LEGACY_TEMPLATE_FILE).get("chat_template")
        if isinstance(legacy, str):
            templates["default"] = legacy
    if (directory / _MORE_TEMPLATES).is_dir():
        for path in sorted((directory / _MORE_TEMPLATES).glob("*.jinja")):
            templates[path.stem] = path.read_text(encoding="utf-8")
    if templates and "chat_template" not in config:
        # one template: a string; several: the list of {"name", "template"} that tokenizer_config.json holds
        config["chat_template"] = templates["default"] if list(templates) == ["default"] else \
            [{"name": name, "template": text} for name, text in templates.items()]
    return json_path.read_bytes(), config


def _read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path} is not a JSON object")
    return value


def tokenizer_files(tokenizer: Any) -> tuple[bytes, dict[str, Any]]:
    """(tokenizer.json bytes, tokenizer_config dict) of a transformers fast tokenizer, a
    `tokenizers.Tokenizer`, a directory holding tokenizer.json [+ tokenizer_config.json, chat_template.jinja]
    or a tokenizer.json file."""
    if isinstance(tokenizer, (str, os.PathLike)):
        path = Path(tokenizer)
        if path.is_dir():
            return _directory_files(path)
        if path.is_file():
            if path.suffix != ".json":
                raise ValueError(f"tokenizer {path}: give a tokenizer.json file or a directory holding one")
            return path.read_bytes(), {}
        raise FileNotFoundError(f"no tokenizer at {path} (give a directory holding {TOKENIZER_JSON}, or the "
                                "file)")
    if type(tokenizer).__module__.startswith("tokenizers") and hasattr(tokenizer, "to_str"):
        return tokenizer.to_str().encode(), {}
    if hasattr(tokenizer, "save_pretrained") and hasattr(tokenizer, "is_fast"):
        if not tokenizer.is_fast:
            raise ValueError(
                f"export_decoder: {type(tokenizer).__name__} is a slow (Python) tokenizer; a decode bundle "
                "carries a fast tokenizer's tokenizer.json: load it with AutoTokenizer.from_pretrained(..., "
                "use_fast=True) or convert it with transformers.convert_slow_tokenizer")
        with tempfile.TemporaryDirectory(prefix="torch-webgpu-tokenizer-") as tmp:
            tokenizer.save_pretrained(tmp)
            return _directory_files(Path(tmp))
    raise TypeError("export_decoder: tokenizer must be a transformers fast tokenizer, a tokenizers.Tokenizer "
                    "or a path to a tokenizer directory or tokenizer.json, not "
                    f"{type(tokenizer).__name__}")


def bundle_tokenizer(tokenizer: Any, vocab_size: int) -> tuple[dict[str, bytes], Any]:
    """The bundle files of `tokenizer` ({tokenizer.json, tokenizer_config.json}) and the loaded tokenizer
    (bundle/tokenizer.py's, to read its special tokens); ValueError when it does not parse or has ids
    beyond the model's `vocab_size`."""
    from torch_webgpu.bundle.tokenizer import BundleTokenizer

    data, config = tokenizer_files(tokenizer)
    text = json.dumps(config, indent=2, ensure_ascii=False, sort_keys=True).encode()
    loaded = BundleTokenizer(data, text, where="export_decoder: the tokenizer")
    if loaded.vocab_size > vocab_size:
        raise ValueError(f"export_decoder: the tokenizer has {loaded.vocab_size} tokens (with added ones), "
                         f"more than the model's vocab_size {vocab_size}; give the model's own tokenizer")
    return {TOKENIZER_JSON: data, TOKENIZER_CONFIG: text}, loaded
