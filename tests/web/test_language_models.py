"""Decode bundles in torch-webgpu.js, in headless Chromium (SwiftShader): the tiny Llama and Qwen2 of
tests/language_models.py (byte-level BPE tokenizers trained in the test, f32 and int4) generate token for
token what transformers gives on CPU and what the Python loader gives, greedy and seeded-sampled; their
tokenizers and chat templates give what `tokenizers` and transformers give; a user's mistakes get the
Python loader's error texts."""

import json
import re
import shutil

import pytest
import tokenizers

import torch_webgpu
from tests.bundle.conftest import edit_manifest
from tests.language_models import KINDS, QUANTS, reference_generate, reference_text
from torch_webgpu.bundle import messages
from torch_webgpu.bundle.format import sha256
from torch_webgpu.bundle.requirements import check_requirements

pytestmark = pytest.mark.slow   # each model: an export, and a page load that builds ~80 pipelines

LONG = "The quick brown fox"     # 19 tokens or so: the 48-token prefill bucket
SHORT = "Hello"                  # the 8-token bucket
NEW_TOKENS = 12
CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Bonjour 你好"}]
# Accents, CJK, emoji (a ZWJ-free skin tone and a variation selector): byte-level tokens split them.
ROUND_TRIP = ["Le café crème est très bon, n'est-ce pas ?", "你好，世界！我们今天学习中文。",
              "Emoji time 🙂 🚀 👍🏽 ❤️ fun", "Grüße aus München: Äpfel, Öl und Übermut", "<|im_start|>x y"]
SAMPLING = {"doSample": True, "temperature": 1.3, "topK": 40, "topP": 0.9, "seed": 7}


def _value(results: dict, name: str):
    assert "load_error" not in results, f"the page did not load the bundle: {results['load_error']}"
    got = results[name]
    assert "error" not in got, f"{name}: the page raised {got['error']}"
    return got["value"]


def _error(results: dict, name: str) -> tuple[str, str]:
    got = results.get("load_error") or results[name].get("error")
    assert got, f"{name}: the page gave {results[name]} instead of an error"
    return got["name"], got["message"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("quant", QUANTS)
def test_page_generates_as_transformers_and_the_python_loader(kind, quant, build_web_language_model,
                                                              run_lm_in_page):
    lm = build_web_language_model(kind, quant)
    ids = lm.tokenizer(LONG)["input_ids"]
    short = lm.tokenizer(SHORT)["input_ids"]
    ops = [
        {"name": "encode", "kind": "encode", "text": LONG},
        {"name": "greedy", "kind": "ids", "prompt": ids, "options": {"maxNewTokens": NEW_TOKENS}},
        {"name": "short", "kind": "ids", "prompt": short, "options": {"maxNewTokens": NEW_TOKENS}},
        {"name": "text", "kind": "text", "prompt": LONG, "options": {"maxNewTokens": NEW_TOKENS}},
        {"name": "sampled", "kind": "ids", "prompt": ids,
         "options": {"maxNewTokens": NEW_TOKENS, **SAMPLING}},
        {"name": "template", "kind": "template", "messages": CHAT},
        {"name": "chat", "kind": "chat", "messages": CHAT, "options": {"maxNewTokens": NEW_TOKENS}},
    ]
    page = run_lm_in_page(lm.path, ops)
    assert _value(page, "encode") == ids
    bundle = torch_webgpu.load(lm.path)
    try:
        for name, prompt in (("greedy", ids), ("short", short)):
            want = reference_generate(lm, prompt, NEW_TOKENS)[len(prompt):]
            assert _value(page, name) == want, name                                 # transformers' CPU
            assert bundle.generate(prompt, NEW_TOKENS)[0, len(prompt):].tolist() == want, name   # loader
        assert page["greedy"]["stats"]["bucket"] == 48 and page["short"]["stats"]["bucket"] == 8
        text = "".join(_value(page, "text"))
        assert text == reference_text(lm, LONG, NEW_TOKENS) == bundle.generate(LONG, NEW_TOKENS)
        assert _value(page, "text") == list(bundle.generate(LONG, NEW_TOKENS, stream=True))   # same pieces
        sampled = bundle.generate(ids, NEW_TOKENS, do_sample=True, temperature=1.3, top_k=40, top_p=0.9,
                                  seed=7)
        assert _value(page, "sampled") == sampled[0, len(ids):].tolist()
        assert _value(page, "sampled") != _value(page, "greedy")
        rendered = lm.tokenizer.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
        assert _value(page, "template") == rendered == bundle.tokenizer.apply_chat_template(CHAT)
        assert "".join(_value(page, "chat")) == bundle.chat(CHAT, NEW_TOKENS)
    finally:
        bundle.release()


@pytest.mark.parametrize("kind", KINDS)
def test_tokenizer_round_trip_equals_tokenizers(kind, build_web_language_model, run_lm_in_page):
    lm = build_web_language_model(kind, "f32")
    reference = tokenizers.Tokenizer.from_file(str(lm.path / "tokenizer.json"))
    ops = []
    for k, text in enumerate(ROUND_TRIP):
        ops.append({"name": f"encode{k}", "kind": "encode", "text": text})
        ids = reference.encode(text).ids
        for skip in (True, False):
            ops.append({"name": f"decode{k}{skip}", "kind": "decode", "ids": ids,
                        "options": {"skipSpecialTokens": skip}})
    page = run_lm_in_page(lm.path, ops)
    for k, text in enumerate(ROUND_TRIP):
        ids = reference.encode(text).ids
        assert _value(page, f"encode{k}") == ids, text
        for skip in (True, False):
            assert _value(page, f"decode{k}{skip}") == reference.decode(ids, skip_special_tokens=skip), text
        assert _value(page, f"decode{k}True") == text or kind == "llama" or "<|" in text   # a round trip


def _python_error(call) -> tuple[str, str]:
    with pytest.raises(Exception) as caught:
        call()
    return type(caught.value).__name__, str(caught.value)


def _reseal_without_tokenizer(manifest: dict) -> None:
    entry = manifest["decoder"].pop("tokenizer")
    for name in entry.values():
        manifest["files"].pop(name)


def test_a_users_mistakes_give_the_loaders_errors(build_web_language_model, run_lm_in_page, web_root):
    lm = build_web_language_model("llama", "f32")
    plain = shutil.copytree(lm.path, web_root / "lm" / "llama-no-tokenizer")
    edit_manifest(plain, _reseal_without_tokenizer)
    bundle = torch_webgpu.load(plain)
    overlong = list(range(1, 50))                    # 49 tokens: past the largest bucket (48)
    cases = {   # op -> the Python loader's call
        "text": ({"kind": "text", "prompt": "Hello"}, lambda: bundle.generate("Hello", 4)),
        "bucket": ({"kind": "ids", "prompt": overlong, "options": {"maxNewTokens": 4}},
                   lambda: bundle.generate(overlong, 4)),
        "max_len": ({"kind": "ids", "prompt": list(range(1, 41)), "options": {"maxNewTokens": 30}},
                    lambda: bundle.generate(list(range(1, 41)), 30)),
        "range": ({"kind": "ids", "prompt": [1, 5000], "options": {"maxNewTokens": 2}},
                  lambda: bundle.generate([1, 5000], 2)),
        "empty": ({"kind": "ids", "prompt": [], "options": {"maxNewTokens": 2}},
                  lambda: bundle.generate([], 2)),
    }
    page = run_lm_in_page(plain, [{"name": name, **op} for name, (op, _) in cases.items()])
    assert _value(run_lm_in_page(plain, [{"name": "info", "kind": "info"}]), "info")["tokenizer"] is False
    for name, (_, call) in cases.items():
        assert _error(page, name) == _python_error(call), name
    assert _error(page, "text")[1] == messages.NO_TOKENIZER.format(bundle="llama-no-tokenizer")
    assert "largest prefill bucket (48)" in _error(page, "bucket")[1]
    assert "exceed the bundle's max_len 64" in _error(page, "max_len")[1]
    bundle.release()


def test_corrupted_tokenizer_files_give_the_loaders_errors(build_web_language_model, run_lm_in_page,
                                                           web_root):
    lm = build_web_language_model("qwen2", "f32")
    probe = [{"name": "encode", "kind": "encode", "text": "Hello"}]

    def copy(name: str):
        return shutil.copytree(lm.path, web_root / "lm" / name)

    # Edited bytes: the hash check (both runtimes before any tokenizer code).
    edited = copy("qwen2-edited-tokenizer")
    (edited / "tokenizer.json").write_text((edited / "tokenizer.json").read_text().replace('"a"', '"b"', 1))
    name, message = _error(run_lm_in_page(edited, probe), "encode")
    python = _python_error(lambda: torch_webgpu.load(edited))
    url = message[:message.index(edited.name) + len(edited.name)]   # the page names the bundle by its URL
    assert url.startswith("http://") and (name, message.replace(url, str(edited), 1)) == python
    assert "tokenizer.json hash mismatch" in message

    def resealed(name: str, file: str, data: bytes):
        path = copy(name)
        (path / file).write_bytes(data)
        edit_manifest(path, lambda m: m["files"].update({file: sha256(data)}))
        return path

    # A tokenizer_config.json that is not an object: the same text, word for word.
    config = resealed("qwen2-config-list", "tokenizer_config.json", b"[1, 2]")
    python = _python_error(lambda: torch_webgpu.load(config).tokenizer)
    assert _error(run_lm_in_page(config, probe), "encode") == python
    assert python[0] == "BundleFormatError" and "is not a JSON object of tokenizer settings" in python[1]
    # A tokenizer.json neither reader can parse: the same text around each parser's own reason.
    broken = resealed("qwen2-tokenizer-broken", "tokenizer.json", b'{"model": {"type": "NoSuchModel"}}')
    name, message = _python_error(lambda: torch_webgpu.load(broken).tokenizer)
    page_name, page_message = _error(run_lm_in_page(broken, probe), "encode")
    template = re.escape(messages.TOKENIZER_UNREADABLE.format(bundle=broken.name, file="tokenizer.json",
                                                              reason="REASON")).replace("REASON", ".+")
    assert page_name == name == "BundleFormatError"
    assert re.fullmatch(template, message) and re.fullmatch(template, page_message), (message, page_message)


def test_an_f16_bundle_on_an_adapter_without_shader_f16(f16_language_bundle, lm_page, run_lm_in_page):
    path = f16_language_bundle
    requires = json.loads((path / "manifest.json").read_text())["requires"]
    assert "shader-f16" in requires["features"]
    adapter = lm_page.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "Promise.all([import('/torch-webgpu.js'), navigator.gpu.requestAdapter()]).then(([T, a]) => done("
        "{limits: T.limitsOf(a, a.info), features: [...a.features],"
        " name: [a.info.vendor, a.info.architecture].filter((s) => s).join(' ')}));")
    assert "shader-f16" not in adapter["features"], "SwiftShader was expected to lack shader-f16"
    python = _python_error(lambda: check_requirements(requires, adapter["limits"], adapter["features"],
                                                      what=f"this adapter ({adapter['name']})"))
    name, message = _error(run_lm_in_page(path, [{"name": "x", "kind": "info"}]), "x")
    assert (name, message) == ("BundleRequirementError", python[1])
    assert "feature 'shader-f16'" in message
