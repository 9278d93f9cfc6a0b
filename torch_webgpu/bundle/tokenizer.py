"""A decode bundle's tokenizer, without torch or transformers: Hugging Face `tokenizers` (Rust) reads the
bundle's tokenizer.json, jinja2 renders the chat template of its tokenizer_config.json the way
transformers' `apply_chat_template` does (a sandboxed environment with trim_blocks/lstrip_blocks,
`raise_exception`, `strftime_now`, a non-escaping `tojson`, the special tokens as variables), and
`TextStream` turns a growing token sequence into text pieces that never split a character.

Both packages are imported on first use: a bundle used with token ids needs neither.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from . import messages
from .format import BundleFormatError, BundleSignatureError

TOKENIZER_JSON = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
# transformers' named special tokens: the chat template sees each one the tokenizer has as a variable
SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
# the names a message's reasoning goes by; transformers fills the first two from any of them
_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")
_INCOMPLETE = "\ufffd"   # what a byte-level decoder gives for the bytes of a character not complete yet


def require(module: str, feature: str) -> Any:
    """Import `module` (a package the text features need) or raise ImportError naming it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(messages.MISSING_PACKAGE.format(feature=feature, package=module)) from None


def _token_text(value: Any) -> str | None:
    """A special token as tokenizer_config.json stores it: a string or an AddedToken's {"content": ...}."""
    if isinstance(value, Mapping):
        value = value.get("content")
    return value if isinstance(value, str) else None


@functools.lru_cache(maxsize=1)
def _template_environment() -> Any:
    """transformers' chat-template environment (utils/chat_template_utils.py)."""
    import datetime

    jinja2 = require("jinja2", "a chat template")
    from jinja2 import nodes
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class GenerationBlock(Extension):
        """`{% generation %}...{% endgeneration %}` (transformers marks assistant text with it): its body."""

        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller: Any) -> str:
            return caller()

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
               sort_keys: bool = False) -> str:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(format: str) -> str:
        return datetime.datetime.now().strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationBlock, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def _chat_messages(conversation: Any, where: str) -> list[dict[str, Any]]:
    """The messages as plain dicts without None values, reasoning under every name templates read."""
    if not isinstance(conversation, Sequence) or isinstance(conversation, (str, bytes)) or not conversation:
        raise BundleSignatureError(f"{where}: a chat is a non-empty list of messages "
                                   "({'role': 'user', 'content': '...'}), not " + repr(conversation)[:80])
    out = []
    for message in conversation:
        if not isinstance(message, Mapping):
            raise BundleSignatureError(f"{where}: chat messages are dicts with 'role' and 'content', not "
                                       f"{type(message).__name__}")
        message = {key: value for key, value in message.items() if value is not None}
        reasoning = next((message[key] for key in _REASONING_FIELDS if key in message), None)
        if reasoning is not None:
            message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
        out.append(message)
    return out


class BundleTokenizer:
    """A bundle's tokenizer: `encode`, `decode`, the special tokens and `apply_chat_template`."""

    def __init__(self, data: bytes, config: bytes, where: str,
                 files: tuple[str, str] = (TOKENIZER_JSON, TOKENIZER_CONFIG)):
        tokenizers = require("tokenizers", "the tokenizer of a decode bundle")
        self.where, self.files = where, files
        try:
            self.config = json.loads(config.decode("utf-8"))
            if not isinstance(self.config, dict):
                raise ValueError("not a JSON object")
        except (ValueError, UnicodeDecodeError) as exc:
            raise BundleFormatError(messages.TOKENIZER_CONFIG_UNREADABLE.format(
                bundle=where, file=files[1], reason=str(exc)[:200])) from None
        try:
            self._tokenizer = tokenizers.Tokenizer.from_str(data.decode("utf-8"))
            self._model_type = json.loads(data)["model"]["type"]
        except Exception as exc:   # tokenizers raises a bare Exception for what it cannot parse
            raise BundleFormatError(messages.TOKENIZER_UNREADABLE.format(
                bundle=where, file=files[0], reason=str(exc).splitlines()[0][:200] if str(exc) else
                type(exc).__name__)) from None
        # as transformers' fast tokenizers: special tokens in the text are matched unless asked otherwise
        self._tokenizer.encode_special_tokens = bool(self.config.get("split_special_tokens", False))
        self.special_tokens_map: dict[str, str] = {
            name: text for name in SPECIAL_TOKENS if (text := _token_text(self.config.get(name))) is not None}
        self.chat_templates = self._templates(self.config.get("chat_template"))
        self._compiled: dict[str, Any] = {}

    @staticmethod
    def _templates(value: Any) -> dict[str, str]:
        if isinstance(value, str):
            return {"default": value}
        if isinstance(value, list):   # tokenizer_config.json's named templates: [{"name", "template"}]
            return {t["name"]: t["template"] for t in value if isinstance(t, Mapping) and "name" in t}
        if isinstance(value, Mapping):
            return {str(k): v for k, v in value.items() if isinstance(v, str)}
        return {}

    @property
    def vocab_size(self) -> int:
        """The number of token ids, added tokens included."""
        return self._tokenizer.get_vocab_size(with_added_tokens=True)

    @property
    def chat_template(self) -> str | None:
        """The default chat template (None without one)."""
        return self.chat_templates.get("default")

    def token_to_id(self, token: str) -> int | None:
        """The id of `token` (None if it is not in the vocabulary)."""
        return self._tokenizer.token_to_id(token)

    def _special(self, name: str) -> str | None:
        return self.special_tokens_map.get(name)

    @property
    def bos_token(self) -> str | None:
        """The beginning-of-sequence token."""
        return self._special("bos_token")

    @property
    def eos_token(self) -> str | None:
        """The end-of-sequence token."""
        return self._special("eos_token")

    @property
    def pad_token(self) -> str | None:
        """The padding token."""
        return self._special("pad_token")

    @property
    def eos_token_id(self) -> int | None:
        """The end-of-sequence token's id."""
        return None if self.eos_token is None else self.token_to_id(self.eos_token)

    @property
    def all_special_ids(self) -> list[int]:
        """Ids of the added tokens marked special (what skip_special_tokens drops)."""
        return sorted(i for i, t in self._tokenizer.get_added_tokens_decoder().items() if t.special)

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of `text`; `add_special_tokens`: the post-processor's (e.g. a bos token first)."""
        if not isinstance(text, str):
            raise BundleSignatureError(f"{self.where}: encode takes a str, not {type(text).__name__}")
        return self._tokenizer.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False) -> str:
        """The text of `ids` (as transformers' fast tokenizers decode it)."""
        text = self._tokenizer.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)
        # transformers 5 cleans up spaces only for non-BPE models that ask for it
        if self.config.get("clean_up_tokenization_spaces") and self._model_type != "BPE":
            for before, after in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"),
                                  (" n't", "n't"), (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"),
                                  (" 're", "'re")):
                text = text.replace(before, after)
        return text

    def _template(self, chat_template: str | None, tools: Any) -> str:
        """The template to render, chosen as transformers' get_chat_template chooses."""
        named = self.chat_templates
        if chat_template is not None:
            return named.get(chat_template, chat_template)
        if tools is not None and "tool_use" in named:
            return named["tool_use"]
        if "default" in named:
            return named["default"]
        if not named:
            raise BundleSignatureError(messages.NO_CHAT_TEMPLATE.format(bundle=self.where,
                                                                        file=self.files[1]))
        raise BundleSignatureError(f"{self.where}: the tokenizer has several chat templates and no default; "
                                   f"pass chat_template=NAME, one of {sorted(named)}")

    def apply_chat_template(self, conversation: Sequence[Mapping[str, Any]],
                            add_generation_prompt: bool = True, *, tools: list | None = None,
                            documents: list | None = None,
                            chat_template: str | None = None, **kwargs: Any) -> str:
        """The chat rendered as text, as transformers' `apply_chat_template(..., tokenize=False)` renders it
        (the special tokens and `kwargs` are template variables); encode it with add_special_tokens=False."""
        source = self._template(chat_template, tools)
        chat = _chat_messages(conversation, self.where)
        jinja2 = require("jinja2", "a chat template")
        compiled = self._compiled.get(source)
        if compiled is None:
            compiled = self._compiled[source] = _template_environment().from_string(source)
        variables = {**self.special_tokens_map, **kwargs}
        try:
            return compiled.render(messages=chat, tools=tools, documents=documents,
                                   add_generation_prompt=add_generation_prompt, **variables)
        except jinja2.exceptions.TemplateError as exc:
            raise BundleSignatureError(messages.CHAT_TEMPLATE_REFUSED.format(bundle=self.where, reason=exc)) \
                from exc

    def stream(self, skip_special_tokens: bool = True) -> TextStream:
        """A TextStream over this tokenizer."""
        return TextStream(self, skip_special_tokens)

    def pieces(self, tokens: Iterable[int], skip_special_tokens: bool = True) -> Iterator[str]:
        """The text of `tokens` in pieces as they come (a TextStream's non-empty pieces)."""
        text = self.stream(skip_special_tokens)
        for token in tokens:
            piece = text.push(token)
            if piece:
                yield piece
        rest = text.finish()
        if rest:
            yield rest

    def __repr__(self) -> str:
        return (f"<torch_webgpu bundle tokenizer of {self.where}: {self.vocab_size} tokens, special "
                f"{self.special_tokens_map}, chat template {'yes' if self.chat_templates else 'no'}>")


class TextStream:
    """Text pieces of a token sequence as it grows: `push(token)` gives the new text, held back while the
    decoded tail is an incomplete character (its remaining bytes come with later tokens); `finish()` gives
    what is left. The pieces concatenate to the decoded sequence."""

    def __init__(self, tokenizer: BundleTokenizer, skip_special_tokens: bool = True):
        self.tokenizer, self.skip_special_tokens = tokenizer, skip_special_tokens
        self.ids: list[int] = []
        self.text = ""   # the text given out so far

    def push(self, token: int) -> str:
        """The new text after `token` ("" while a character is incomplete)."""
        self.ids.append(int(token))
        text = self.tokenizer.decode(self.ids, self.skip_special_tokens)
        if text.endswith(_INCOMPLETE) or not text.startswith(self.text):
            return ""
        piece, self.text = text[len(self.text):], text
        return piece

    def finish(self) -> str:
        """The rest of the text: the sequence is complete (an unfinished character stays as U+FFFD)."""
        text = self.tokenizer.decode(self.ids, self.skip_special_tokens)
        if not text.startswith(self.text):
            raise RuntimeError(f"{self.tokenizer.where}: the tokenizer's decoder changed text it had given "
                               "out; streamed pieces would not add up to the text")
        piece, self.text = text[len(self.text):], text
        return piece
