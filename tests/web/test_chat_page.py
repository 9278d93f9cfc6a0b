"""The chat page of `torch-webgpu serve` and `export-web` for a decode bundle, in headless Chromium: a typed
message gets the reply the Python loader's chat() gives, streamed, with tokens/s (the screenshot in docs/
comes from that test); the stop button aborts a reply; the pages carry the tokenizer libraries' ES module
builds from node_modules, and say how to install them when they are missing."""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import torch_webgpu
from torch_webgpu.cli.web import make_server, serve_in_thread
from torch_webgpu.web import NODE_MODULES_ENV, TEXT_LIBRARIES, node_modules

pytestmark = pytest.mark.slow   # an export and a page load (pipelines on SwiftShader) per test

REPO = Path(__file__).resolve().parents[2]
SCREENSHOT = REPO / "docs" / "chat-page.png"
NEW_TOKENS = 16
MESSAGES = ["Hello, how are you?", "Tell me about the café in München."]   # the second: past max_len


def _state(browser) -> str:
    return browser.find_element("tag name", "body").get_attribute("data-state")


def _wait(browser, states, timeout=300) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _state(browser) in states:
            return _state(browser)
        time.sleep(0.1)
    raise AssertionError(f"the chat page stayed {_state(browser)!r} for {timeout}s: "
                         f"{browser.find_element('id', 'error').text}")


def _set(browser, control: str, value: str) -> None:
    box = browser.find_element("id", control)
    box.clear()
    box.send_keys(value)


def _send(browser, text: str) -> str:
    """Type `text`, press Enter, wait for the whole reply; the reply's text."""
    browser.find_element("id", "prompt").send_keys(text + "\n")
    assert _wait(browser, ("done", "error", "stopped")) == "done", browser.find_element("id", "error").text
    return browser.execute_script("return window.torchWebGPUChat.reply")


def test_serve_chat_page_answers_typed_messages(page, build_web_language_model):
    lm = build_web_language_model("llama", "f32")
    path_entries = [str(REPO), os.environ.get("PYTHONPATH")]   # (a worktree's sitecustomize rides along)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, path_entries))}
    proc = subprocess.Popen([sys.executable, "-m", "torch_webgpu", "serve", str(lm.path), "--port", "0"],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = [proc.stdout.readline(), proc.stdout.readline()]
        url = re.search(r"open (http://\S+)", lines[1])
        assert url and "decode bundle" in lines[0] and "text (its tokenizer)" in lines[0], lines
        page.get(url.group(1))
        assert _wait(page, ("ready", "error")) == "ready", page.find_element("id", "error").text
        _set(page, "max-new-tokens", str(NEW_TOKENS))
        bundle = torch_webgpu.load(lm.path)
        try:
            for text in MESSAGES:
                reply = _send(page, text)
                # the conversation the template rendered (older turns left out where the KV cache is full)
                last = page.execute_script("return window.torchWebGPUChat.last")
                assert last["messages"][-1] == {"role": "user", "content": text}
                assert last["maxNewTokens"] == min(NEW_TOKENS, 64 - last["promptTokens"])
                assert reply == bundle.chat(last["messages"], last["maxNewTokens"]), text
        finally:
            bundle.release()
        history = page.execute_script("return window.torchWebGPUChat.messages")
        assert [m["content"] for m in history[::2]] == MESSAGES
        assert all(m["role"] == "assistant" for m in history[1::2])
        bubbles = page.find_elements("css selector", "#messages .message .text")
        assert [b.text for b in bubbles][::2] == MESSAGES
        stats = page.find_element("id", "stats").text
        assert re.fullmatch(r"prefill \d+ tokens in \d+ ms \([\d.]+ tokens/s\) · decode \d+ tokens at [\d.]+ "
                            r"tokens/s · 2 older messages left out \(max_len 64\)", stats), stats
        assert float(page.find_element("id", "stats").get_attribute("data-decode-tokens-per-s")) > 0
        height = page.execute_script("return document.documentElement.scrollHeight")
        page.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                             {"width": 1100, "height": height, "deviceScaleFactor": 1, "mobile": False})
        SCREENSHOT.parent.mkdir(exist_ok=True)
        page.get_screenshot_as_file(str(SCREENSHOT))
        page.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_export_web_chat_page_stops_a_reply(page, build_web_language_model, tmp_path):
    from torch_webgpu.cli.main import main

    lm = build_web_language_model("qwen2", "f32")
    site = tmp_path / "site"
    assert main(["export-web", str(lm.path), str(site)]) == 0
    for package, (build, page_path) in TEXT_LIBRARIES.items():   # the builds the import map names
        assert (site / page_path).read_bytes() == (node_modules() / build).read_bytes(), package
    server = make_server({"/": site})   # any static server
    serve_in_thread(server)
    try:
        page.get(f"http://localhost:{server.server_address[1]}/")
        assert _wait(page, ("ready", "error")) == "ready", page.find_element("id", "error").text
        _set(page, "max-new-tokens", "40")
        page.find_element("id", "prompt").send_keys(MESSAGES[0] + "\n")
        deadline = time.monotonic() + 120
        while not page.execute_script("return window.torchWebGPUChat.reply") and time.monotonic() < deadline:
            time.sleep(0.01)
        page.find_element("id", "stop").click()
        assert _wait(page, ("done", "stopped", "error")) == "stopped", page.find_element("id", "error").text
        generated = page.execute_script("return window.torchWebGPUChat.lm.stats.newTokens")
        assert 0 < generated < 40
        assert page.find_elements("css selector", "#messages .message .text")[-1].text.endswith("[stopped]")
        # the page goes on: a new message after a stopped one
        assert _send(page, MESSAGES[1])
    finally:
        server.shutdown()
        server.server_close()


def test_pages_name_the_set_up_step_when_the_libraries_are_missing(build_web_language_model, tmp_path, capsys,
                                                                   monkeypatch):
    from torch_webgpu.cli.main import main

    lm = build_web_language_model("llama", "f32")
    monkeypatch.setenv(NODE_MODULES_ENV, str(tmp_path / "empty"))
    assert main(["export-web", str(lm.path), str(tmp_path / "site")]) == 2
    err = capsys.readouterr().err
    assert "@huggingface/tokenizers and @huggingface/jinja" in err and "npm ci" in err, err
    assert not (tmp_path / "site").exists()   # nothing written
