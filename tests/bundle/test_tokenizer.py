"""A decode bundle's tokenizer (bundle/tokenizer.py, written by compiler/export/tokenizer.py): the forms
export_decoder takes, encode/decode equal to `tokenizers` and transformers, the chat template rendered as
transformers renders it, and text streamed without splitting a character. No device is needed here."""

import json
import sys

import pytest
import tokenizers
import transformers

from tests.language_models import KINDS, make_tokenizer, train_tokenizer
from torch_webgpu.bundle import BundleFormatError, BundleSignatureError
from torch_webgpu.bundle.tokenizer import BundleTokenizer
from torch_webgpu.compiler.export.decoder import _eos_ids
from torch_webgpu.compiler.export.tokenizer import bundle_tokenizer, tokenizer_files

TEXTS = ["Hello world!", "Le café crème, déjà vu.", "你好，世界！", "東京 🙂🚀 👍🏽", "Grüße 🦀 ünïcödé",
         "mixed 中文 and English, ça va? 🎉", "", "  spaces   and\ttabs\nnewlines  "]


@pytest.fixture(scope="module", params=KINDS)
def tokenizer_pair(request):
    """A transformers fast tokenizer and the bundle tokenizer made from what export_decoder stores."""
    fast = make_tokenizer(request.param)
    files, loaded = bundle_tokenizer(fast, len(fast))
    return fast, loaded, files


def test_the_pair_of_files(tokenizer_pair):
    fast, _, files = tokenizer_pair
    assert sorted(files) == ["tokenizer.json", "tokenizer_config.json"]
    config = json.loads(files["tokenizer_config.json"])
    assert config["chat_template"] == fast.chat_template            # moved in from chat_template.jinja
    assert config["eos_token"] == fast.eos_token and config["bos_token"] == fast.bos_token
    assert tokenizers.Tokenizer.from_str(files["tokenizer.json"].decode()).get_vocab() == fast.get_vocab()


def test_round_trip_equals_tokenizers_and_transformers(tokenizer_pair):
    fast, ours, _ = tokenizer_pair
    rust = fast.backend_tokenizer
    for text in TEXTS:
        ids = ours.encode(text)
        assert ids == fast(text)["input_ids"] == rust.encode(text).ids
        bare = fast(text, add_special_tokens=False)["input_ids"]
        assert ours.encode(text, add_special_tokens=False) == bare
        for skip in (False, True):
            assert ours.decode(ids, skip_special_tokens=skip) == fast.decode(ids, skip_special_tokens=skip)
        assert ours.decode(ids, skip_special_tokens=True) == text            # byte-level BPE is lossless
    assert ours.special_tokens_map == fast.special_tokens_map
    assert ours.eos_token_id == fast.eos_token_id and ours.vocab_size == len(fast)
    assert set(fast.all_special_ids) <= set(ours.all_special_ids)   # (+ added tokens marked special)


CHATS = [
    [{"role": "user", "content": "Hello 你好"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Ça va? 🙂"},
     {"role": "assistant", "content": "Oui.  "}, {"role": "user", "content": " And you? "}],
    [{"role": "user", "content": "reasoning", "reasoning_content": "hmm", "name": None}],
]


@pytest.mark.parametrize("chat", CHATS, ids=["one", "turns", "extra-keys"])
@pytest.mark.parametrize("generation_prompt", [True, False])
def test_chat_template_renders_as_transformers(tokenizer_pair, chat, generation_prompt):
    fast, ours, _ = tokenizer_pair
    want = fast.apply_chat_template(chat, tokenize=False, add_generation_prompt=generation_prompt)
    assert ours.apply_chat_template(chat, add_generation_prompt=generation_prompt) == want
    tools = [{"name": "weather", "description": "Wetter für Zürich ☀", "parameters": {"city": "str"}}]
    want = fast.apply_chat_template(chat, tokenize=False, add_generation_prompt=True, tools=tools,
                                    bos_token="<override>")
    assert ours.apply_chat_template(chat, tools=tools, bos_token="<override>") == want
    ids = fast.apply_chat_template(chat, tokenize=True, add_generation_prompt=True, return_dict=False)
    assert ours.encode(ours.apply_chat_template(chat), add_special_tokens=False) == list(ids)


def test_chat_template_errors_are_named(tokenizer_pair):
    fast, ours, _ = tokenizer_pair
    bad = [{"role": "robot", "content": "beep"}]
    with pytest.raises(Exception, match="Only system, user and assistant"):
        fast.apply_chat_template(bad, tokenize=False)
    with pytest.raises(BundleSignatureError, match="chat template refused the messages: Only system, user"):
        ours.apply_chat_template(bad)
    with pytest.raises(BundleSignatureError, match="non-empty list of messages"):
        ours.apply_chat_template([])
    with pytest.raises(BundleSignatureError, match="dicts with 'role' and 'content'"):
        ours.apply_chat_template(["hello"])


def test_template_features_transformers_provides():
    """strftime_now, {% generation %}, loop controls and tojson's options, in the sandbox."""
    template = ("{% for m in messages %}{% if loop.index > 1 %}{% break %}{% endif %}"
                "{% generation %}{{ m.content | tojson(indent=1) }}{% endgeneration %}{% endfor %}"
                "{{ strftime_now('%Y') | length }}{{ eos_token }}")
    fast = make_tokenizer("qwen2")
    fast.chat_template = template
    _, ours = bundle_tokenizer(fast, len(fast))
    chat = [{"role": "user", "content": "é\"x"}, {"role": "user", "content": "skipped"}]
    assert ours.apply_chat_template(chat) == fast.apply_chat_template(chat, tokenize=False,
                                                                      add_generation_prompt=True)
    fast.chat_template = "{{ ''.__class__.__mro__ }}"
    _, ours = bundle_tokenizer(fast, len(fast))
    with pytest.raises(Exception, match="unsafe|__class__"):    # the sandbox refuses attribute escapes
        ours.apply_chat_template(chat)


def test_text_streams_whole_characters(tokenizer_pair):
    _, ours, _ = tokenizer_pair
    text = "café 你好 🦀🦀 ok 👍🏽!"
    ids = ours.encode(text, add_special_tokens=False)
    stream = ours.stream()
    pieces = [stream.push(i) for i in ids]
    pieces.append(stream.finish())
    assert "".join(pieces) == text
    assert "" in pieces[:-1]            # 🦀 is not in the corpus: its bytes come in several tokens
    assert all("\ufffd" not in p for p in pieces)
    assert sum(1 for p in pieces if p) > 5


def test_export_takes_every_tokenizer_form(tmp_path):
    fast = make_tokenizer("llama")
    want = fast.backend_tokenizer.encode("Grüße 🦀").ids
    fast.save_pretrained(tmp_path / "saved")
    assert (tmp_path / "saved" / "chat_template.jinja").exists()
    rust = train_tokenizer("llama")
    rust.save(str(tmp_path / "tokenizer.json"))
    for form in (fast, rust, tmp_path / "saved", str(tmp_path / "saved"), tmp_path / "tokenizer.json"):
        files, loaded = bundle_tokenizer(form, len(fast))
        assert loaded.encode("Grüße 🦀") == want
    _, from_dir = bundle_tokenizer(tmp_path / "saved", len(fast))
    assert from_dir.chat_template == fast.chat_template and from_dir.eos_token == "<|eot_id|>"
    _, bare = bundle_tokenizer(rust, len(fast))
    assert bare.chat_template is None and bare.special_tokens_map == {}


def test_export_refuses_bad_tokenizers(tmp_path):
    fast = make_tokenizer("llama")
    with pytest.raises(ValueError, match="more than the model's vocab_size 100"):
        bundle_tokenizer(fast, 100)
    with pytest.raises(FileNotFoundError, match="no tokenizer at"):
        tokenizer_files(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="has no tokenizer.json"):
        tokenizer_files(tmp_path / "empty")
    (tmp_path / "broken.json").write_text("{\"model\": 3}")
    with pytest.raises(BundleFormatError, match="broken|tokenizer.json cannot be read"):
        bundle_tokenizer(tmp_path / "broken.json", 1000)
    with pytest.raises(TypeError, match="transformers fast tokenizer, a tokenizers.Tokenizer"):
        tokenizer_files(42)


def test_export_refuses_a_slow_tokenizer(tmp_path):
    """A Python (slow) tokenizer has no tokenizer.json to store."""
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world"]))
    try:   # transformers 5 keeps the Python WordPiece tokenizer under this name
        from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy as Slow
    except ImportError:
        from transformers import BertTokenizer as Slow
    slow = Slow(str(vocab))
    assert not slow.is_fast
    with pytest.raises(ValueError, match="slow \\(Python\\) tokenizer.*use_fast=True"):
        tokenizer_files(slow)


def test_eos_ids_fall_back_to_the_tokenizer():
    fast = make_tokenizer("qwen2")
    _, ours = bundle_tokenizer(fast, len(fast))
    config = transformers.Qwen2Config(vocab_size=len(fast), hidden_size=8, num_hidden_layers=1,
                                      num_attention_heads=1, intermediate_size=8, eos_token_id=None)

    class LM:
        pass

    lm = LM()
    lm.config = config
    lm.generation_config = transformers.GenerationConfig(eos_token_id=[7, 9])
    assert _eos_ids(lm, ours) == [7, 9]                       # the generation config's first
    lm.generation_config = transformers.GenerationConfig()
    config.eos_token_id = 5
    assert _eos_ids(lm, ours) == [5]                          # then the model config's
    config.eos_token_id = None
    assert _eos_ids(lm, ours) == [fast.eos_token_id]          # then the tokenizer's eos_token
    assert _eos_ids(lm) == []


def test_unreadable_files_are_named():
    with pytest.raises(BundleFormatError, match="m.bundle: tokenizer.json cannot be read as a Hugging Face"):
        BundleTokenizer(b"{not json", b"{}", where="m.bundle")
    with pytest.raises(BundleFormatError, match="m.bundle: tokenizer_config.json is not a JSON object"):
        BundleTokenizer(train_tokenizer("llama").to_str().encode(), b"[1]", where="m.bundle")


def test_missing_packages_are_named(monkeypatch):
    data = train_tokenizer("llama").to_str().encode()
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    with pytest.raises(ImportError, match="needs the Python package 'tokenizers': pip install tokenizers"):
        BundleTokenizer(data, b"{}", where="m.bundle")
    monkeypatch.undo()
    fast = make_tokenizer("llama")
    _, ours = bundle_tokenizer(fast, len(fast))
    from torch_webgpu.bundle import tokenizer as module

    module._template_environment.cache_clear()
    monkeypatch.setitem(sys.modules, "jinja2", None)
    with pytest.raises(ImportError, match="needs the Python package 'jinja2': pip install jinja2"):
        ours.apply_chat_template(CHATS[0])
    monkeypatch.undo()
    module._template_environment.cache_clear()
