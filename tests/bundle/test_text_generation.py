"""Text in, text out with decode bundles that carry a tokenizer (tests/language_models.py: tiny Llama and
Qwen2, f32 and int4): tokens and text equal to transformers' CPU generate, streamed pieces, chat, seeded
sampling, the errors a user can cause, and `torch-webgpu generate` with text."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import torch_webgpu
from tests.language_models import reference_generate, reference_text
from torch_webgpu.bundle import BundleFormatError, BundleIntegrityError, BundleSignatureError
from torch_webgpu.bundle.format import sha256

from .conftest import edit_manifest
from .test_bundle import BLOCKER, REPO

SHORT, LONG = "Hello", "The quick brown fox"      # the 8-token and the 48-token prefill buckets
NEW_TOKENS = 16
CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Bonjour 你好"}]


def split_characters(tokenizer, ids):
    """Characters of decode(ids) (other than U+FFFD) whose bytes come in more than one token."""
    final = tokenizer.decode(ids, skip_special_tokens=True)
    found = set()
    for k in range(1, len(ids)):
        text = tokenizer.decode(ids[:k], skip_special_tokens=True)
        at = len(text) - 1
        if text.endswith("\ufffd") and at < len(final) and final[at] != "\ufffd" and \
                final.startswith(text[:-1]):
            found.add(final[at])
    return found


@pytest.mark.parametrize("prompt", [SHORT, LONG])
def test_greedy_tokens_and_text_equal_transformers(language_model, language_bundle, prompt):
    ids = language_model.tokenizer(prompt)["input_ids"]
    assert language_bundle._bucket(len(ids)) == (8 if prompt == SHORT else 48)
    want = reference_generate(language_model, ids, NEW_TOKENS)
    assert language_bundle.generate(ids, NEW_TOKENS).tolist() == [want]
    text = language_bundle.generate(prompt, NEW_TOKENS)
    assert isinstance(text, str) and text == reference_text(language_model, prompt, NEW_TOKENS)


def test_streamed_pieces_keep_characters_whole(language_model, language_bundle):
    ids = language_model.tokenizer(LONG)["input_ids"]
    continuation = reference_generate(language_model, ids, NEW_TOKENS)[len(ids):]
    assert split_characters(language_model.tokenizer, continuation)   # the prompt's point: split characters
    text = language_bundle.generate(LONG, NEW_TOKENS)
    pieces = list(language_bundle.generate(LONG, NEW_TOKENS, stream=True))
    assert "".join(pieces) == text and len(pieces) > 1 and all(pieces)
    called = []
    assert language_bundle.generate(LONG, NEW_TOKENS, streamer=called.append) == text
    assert called == pieces
    for piece in pieces:    # a piece ending in an incomplete character would show U+FFFD the text lacks
        at = text.index(piece)
        assert piece == text[at:at + len(piece)]
    streamed_ids = []
    assert list(language_bundle.generate(ids, NEW_TOKENS, stream=True, streamer=streamed_ids.append)) == \
        streamed_ids == continuation


def test_chat_equals_transformers(language_model, language_bundle):
    tok = language_model.tokenizer
    rendered = language_bundle.tokenizer.apply_chat_template(CHAT)
    assert rendered == tok.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    ids = list(tok.apply_chat_template(CHAT, tokenize=True, add_generation_prompt=True, return_dict=False))
    want = reference_generate(language_model, ids, 12)[len(ids):]
    reply = language_bundle.chat(CHAT, 12)
    assert reply == tok.decode(want, skip_special_tokens=True)
    assert "".join(language_bundle.chat(CHAT, 12, stream=True)) == reply


def test_seeded_sampling_repeats(llama_text):
    bundle = torch_webgpu.load(llama_text.path)
    options = dict(do_sample=True, temperature=1.5, top_k=50, top_p=0.95)
    a = bundle.generate(SHORT, 12, seed=7, **options)
    assert a == bundle.generate(SHORT, 12, seed=7, **options)
    assert "".join(bundle.generate(SHORT, 12, seed=7, stream=True, **options)) == a
    assert len({bundle.generate(SHORT, 12, seed=s, **options) for s in range(4)}) > 1
    assert bundle.generate(SHORT, 12, do_sample=True, top_k=1, seed=3) == bundle.generate(SHORT, 12)
    assert bundle.chat(CHAT, 8, seed=7, **options) == bundle.chat(CHAT, 8, seed=7, **options)
    bundle.release()


def test_overlong_prompts_are_named(llama_text):
    bundle = torch_webgpu.load(llama_text.path)
    long_text = "你好世界 " * 9
    n = len(llama_text.tokenizer(long_text)["input_ids"])
    assert 48 < n <= 60
    with pytest.raises(BundleSignatureError, match=f"llama-f32: a prompt of {n} tokens is longer than the "
                       r"largest prefill bucket \(48\); re-export with a larger prompt_buckets entry"):
        bundle.generate(long_text, 4)
    with pytest.raises(BundleSignatureError, match=r"llama-f32: 2 prompt \+ 63 new tokens exceed the "
                       r"bundle's max_len 64 \(its KV cache\); re-export with a larger max_len"):
        bundle.generate(SHORT, 63)
    chat = [{"role": "user", "content": "你好世界 " * 7}]
    n = len(llama_text.tokenizer.apply_chat_template(chat, add_generation_prompt=True, return_dict=False))
    assert 48 < n <= 60
    with pytest.raises(BundleSignatureError, match=f"a prompt of {n} tokens is longer than the largest"):
        bundle.chat(chat, 4)
    assert bundle.generate(bundle.tokenizer.encode(SHORT)).shape[1] <= 64   # by default: up to max_len
    stream = bundle.generate(SHORT, 4, stream=True)
    next(stream)
    with pytest.raises(BundleSignatureError, match="a generation is still running on this bundle"):
        bundle.generate(SHORT, 4)
    stream.close()                                                          # closing it ends it
    assert bundle.generate(SHORT, 4) == reference_text(llama_text, SHORT, 4)
    bundle.release()


def _drop_tokenizer(manifest):
    del manifest["decoder"]["tokenizer"]
    del manifest["files"]["tokenizer.json"], manifest["files"]["tokenizer_config.json"]


def test_text_needs_a_tokenizer(llama_text_copy):
    edit_manifest(llama_text_copy, _drop_tokenizer)
    bundle = torch_webgpu.load(llama_text_copy)
    assert bundle.tokenizer is None
    message = ("llama-edited was exported without a tokenizer, so it takes token ids, not text; re-export it "
               "with a tokenizer")
    for call in (lambda: bundle.generate("Hello", 2), lambda: bundle.chat(CHAT, 2)):
        with pytest.raises(BundleSignatureError, match=message):
            call()
    assert bundle.generate([0, 5, 6], 2).shape == (1, 5)     # token ids still work
    bundle.release()


def test_corrupted_tokenizer_files_are_named(llama_text_copy):
    path = llama_text_copy / "tokenizer.json"
    original = path.read_bytes()
    path.write_bytes(original.replace(b'"model"', b'"modle"', 1))
    with pytest.raises(BundleIntegrityError, match="tokenizer.json hash mismatch"):
        torch_webgpu.load(llama_text_copy)

    def rehash(manifest):
        manifest["files"]["tokenizer.json"] = sha256(path.read_bytes())

    edit_manifest(llama_text_copy, rehash)    # the hash is right, the content is not a tokenizer
    bundle = torch_webgpu.load(llama_text_copy)
    with pytest.raises(BundleFormatError, match="llama-edited: tokenizer.json cannot be read as a Hugging "
                       "Face tokenizer .*; re-export the bundle with a fast tokenizer"):
        bundle.generate("Hello", 2)
    assert bundle.generate([0, 5, 6], 2).shape == (1, 5)
    bundle.release()


def test_chat_needs_a_template(llama_text_copy):
    config_path = llama_text_copy / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    del config["chat_template"]
    config_path.write_text(json.dumps(config))
    edit_manifest(llama_text_copy, lambda m: m["files"].update({"tokenizer_config.json":
                                                                 sha256(config_path.read_bytes())}))
    bundle = torch_webgpu.load(llama_text_copy)
    with pytest.raises(BundleSignatureError, match="llama-edited: the tokenizer has no chat template "
                       r"\(tokenizer_config.json has no \"chat_template\"\); generate from plain text"):
        bundle.chat(CHAT, 2)
    assert isinstance(bundle.generate("Hello", 2), str)
    bundle.release()


def test_text_without_torch_or_transformers(llama_text):
    want = reference_text(llama_text, LONG, 8)
    script = BLOCKER.replace('"torchgen"}', '"torchgen", "transformers"}') + textwrap.dedent(f"""
        import json
        import torch_webgpu
        bundle = torch_webgpu.load({str(llama_text.path)!r})
        text = bundle.generate({LONG!r}, 8)
        pieces = list(bundle.generate({LONG!r}, 8, stream=True))
        reply = bundle.chat({CHAT!r}, 4)
        loaded = sorted({{m.split(".")[0] for m, v in sys.modules.items() if v is not None}} & BLOCKED)
        assert not loaded, loaded
        print(json.dumps([text, pieces, reply]))
    """)
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": path}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text, pieces, reply = json.loads(proc.stdout.strip().splitlines()[-1])
    assert text == want and "".join(pieces) == text and isinstance(reply, str)


def test_cli_generate_text_chat_and_ids(llama_text, llama_text_copy, capsys):
    from torch_webgpu.cli.main import main

    path = str(llama_text.path)
    assert main(["generate", path, "--prompt", LONG, "--max-new-tokens", "8"]) == 0
    assert capsys.readouterr().out == reference_text(llama_text, LONG, 8) + "\n"
    assert main(["generate", path, "--chat", "--prompt", "Bonjour 你好", "--max-new-tokens", "6"]) == 0
    tok = llama_text.tokenizer
    ids = list(tok.apply_chat_template([{"role": "user", "content": "Bonjour 你好"}], tokenize=True,
                                       add_generation_prompt=True, return_dict=False))
    want = tok.decode(reference_generate(llama_text, ids, 6)[len(ids):], skip_special_tokens=True)
    assert capsys.readouterr().out == want + "\n"
    assert main(["generate", path, "--ids", "0,15,99", "--max-new-tokens", "5"]) == 0
    want = reference_generate(llama_text, [0, 15, 99], 5)
    assert capsys.readouterr().out.strip() == ",".join(map(str, want))
    assert main(["generate", path, "--prompt", LONG, "--max-new-tokens", "4", "--sample", "--seed", "3",
                 "--top-k", "20"]) == 0
    sampled = capsys.readouterr().out
    assert main(["generate", path, "--prompt", LONG, "--max-new-tokens", "4", "--sample", "--seed", "3",
                 "--top-k", "20"]) == 0
    assert capsys.readouterr().out == sampled

    assert main(["generate", path, "--prompt", "1,2,3", "--ids", "1,2"]) == 2
    assert "--prompt and --ids" in capsys.readouterr().err
    assert main(["generate", path, "--ids", "1,x"]) == 2
    assert "--ids takes token ids" in capsys.readouterr().err
    assert main(["inspect", path]) == 0
    assert "tokenizer: tokenizer.json + tokenizer_config.json, chat template: yes" in capsys.readouterr().out
    edit_manifest(llama_text_copy, _drop_tokenizer)
    assert main(["generate", str(llama_text_copy), "--prompt", "Hello"]) == 2
    assert "llama-edited was exported without a tokenizer" in capsys.readouterr().err
    assert main(["generate", str(llama_text_copy), "--chat"]) == 2
    assert "llama-edited was exported without a tokenizer" in capsys.readouterr().err
    assert main(["inspect", str(llama_text_copy)]) == 0
    assert "tokenizer: none (token ids in and out)" in capsys.readouterr().out


def test_cli_chat_reads_turns_from_stdin(llama_text, monkeypatch, capsys):
    """Without --prompt, --chat holds a conversation over stdin's lines (a terminal gets a prompt sign)."""
    import io

    from torch_webgpu.cli.main import main

    monkeypatch.setattr(sys, "stdin", io.StringIO("Bonjour\nÇa va?\n"))
    assert main(["generate", str(llama_text.path), "--chat", "--max-new-tokens", "4"]) == 0
    out = capsys.readouterr().out.splitlines()
    bundle = torch_webgpu.load(llama_text.path)
    first = bundle.chat([{"role": "user", "content": "Bonjour"}], 4)
    second = bundle.chat([{"role": "user", "content": "Bonjour"}, {"role": "assistant", "content": first},
                          {"role": "user", "content": "Ça va?"}], 4)
    assert out == [first, second]
    bundle.release()


def test_sampler_comes_from_the_bundle(llama_text_copy):
    """The loader runs the bundle's sampler.wgsl (what the page runs), not the kernel library's."""
    bundle = torch_webgpu.load(llama_text_copy)
    assert bundle._sampler_wgsl == (llama_text_copy / "sampler.wgsl").read_text()
    from torch_webgpu.kernels.sampling import sample_wgsl

    assert bundle._sampler_wgsl == sample_wgsl("f32")
    bundle.release()
    edit_manifest(llama_text_copy, lambda m: m["decoder"]["sampler"].update({"dtype": "f16"}))
    with pytest.raises(BundleFormatError, match="sampler"):
        torch_webgpu.load(llama_text_copy)


def test_ids_form_unchanged(language_model, language_bundle):
    out = language_bundle.generate(np.array([3, 4, 5]), 3)
    assert out.dtype == np.int64 and out.tolist() == [reference_generate(language_model, [3, 4, 5], 3)]
