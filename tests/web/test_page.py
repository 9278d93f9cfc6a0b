"""The page of `torch-webgpu serve` and `export-web` in headless Chromium: signature, a run on an uploaded
.npy input that matches torch, timing, and the loader's error for a bad bundle."""

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from torch_webgpu.cli.web import bundle_mounts, make_server, page_config, serve_in_thread

REPO = Path(__file__).resolve().parents[2]


def _wait_state(browser, states=("ran", "error"), timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = browser.find_element("tag name", "body").get_attribute("data-state")
        if state in states:
            return state
        time.sleep(0.1)
    error = browser.find_element("id", "error").text
    raise AssertionError(f"the page stayed {state!r} for {timeout}s: {error}")


def _click(browser, button, states=("ran", "error")):
    browser.execute_script("document.body.dataset.state = 'busy'")
    browser.find_element("id", button).click()
    return _wait_state(browser, states)


def _page_outputs(browser) -> list[np.ndarray]:
    outs = browser.execute_script(
        "return window.torchWebGPUPage.lastOutputs.map("
        "(o) => ({data: Array.from(o.data, Number), shape: o.shape, dtype: o.dtype}))")
    return [np.asarray(o["data"], dtype=o["dtype"]).reshape(o["shape"]) for o in outs]


@pytest.fixture
def served(page, web_root):
    """serve(bundle) -> the URL of an in-process `serve` server of `bundle` (stopped after the test)."""
    servers = []

    def serve(bundle: Path) -> str:
        server = make_server(bundle_mounts(bundle), page_config(bundle))
        serve_in_thread(server)
        servers.append(server)
        return f"http://localhost:{server.server_address[1]}/"

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


def test_serve_command_page_runs_an_uploaded_npy(page, mlp_web, tmp_path):
    path, model, x = mlp_web
    np.save(tmp_path / "x.npy", x)
    path_entries = [str(REPO), os.environ.get("PYTHONPATH")]   # (a worktree's sitecustomize rides along)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, path_entries))}
    proc = subprocess.Popen([sys.executable, "-m", "torch_webgpu", "serve", str(path), "--port", "0"],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = [proc.stdout.readline(), proc.stdout.readline()]
        url = re.search(r"open (http://\S+)", lines[1])
        assert url, f"`torch-webgpu serve` printed {lines}"
        assert "(x: float32[4, 16]) -> (float32[4, 8])" in lines[0]
        page.get(url.group(1))
        assert _wait_state(page, ("ready", "error")) == "ready", page.find_element("id", "error").text
        assert page.find_element("id", "signature").text == "(x: float32[4, 16]) -> (float32[4, 8])"
        page.find_element("id", "input-file-0").send_keys(str(tmp_path / "x.npy"))
        deadline = time.monotonic() + 10
        while "x.npy" not in page.find_element("id", "input-note-0").text and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _click(page, "run") == "ran", page.find_element("id", "error").text
        (y,) = _page_outputs(page)
        with torch.no_grad():
            torch.testing.assert_close(torch.from_numpy(y), model(torch.from_numpy(x)), atol=1e-4, rtol=1e-4)
        assert re.match(r"one call: [\d.]+ ms", page.find_element("id", "timing").text)
        assert page.find_element("id", "output-0").text.startswith("4x8xf32")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_export_web_page_times_calls(page, mlp_web, tmp_path, cli_run):
    path, _, _ = mlp_web
    site = tmp_path / "site"
    cli_run("export-web", path, site)
    names = {p.name for p in site.iterdir()}
    assert names >= {"index.html", "app.js", "torch-webgpu.js", "config.json", "bundle"}
    server = make_server({"/": site})   # any static server: the page needs nothing from torch-webgpu's
    serve_in_thread(server)
    try:
        page.get(f"http://localhost:{server.server_address[1]}/")
        assert _wait_state(page, ("ready", "error")) == "ready", page.find_element("id", "error").text
        assert _click(page, "bench") == "ran", page.find_element("id", "error").text
        timing = page.find_element("id", "timing").text
        assert re.match(r"per call over 20 calls: median [\d.]+ ms, min [\d.]+ ms, max [\d.]+ ms",
                        timing), timing
        assert float(page.find_element("id", "timing").get_attribute("data-median-ms")) > 0
    finally:
        server.shutdown()
        server.server_close()


def test_export_web_refuses_a_corrupted_bundle(mlp_web, tmp_path, cli_run):
    path, _, _ = mlp_web
    broken = Path(shutil.copytree(path, tmp_path / "broken.bundle"))
    (broken / "constants.safetensors").write_bytes(b"\0" * 64)
    code, _, err = cli_run("export-web", broken, tmp_path / "site", check=False)
    assert code == 2 and "constants.safetensors hash mismatch" in err


def test_page_shows_the_loaders_error(page, served, mlp_web, tmp_path):
    path, _, _ = mlp_web
    broken = Path(shutil.copytree(path, tmp_path / "broken.bundle"))
    (broken / "constants.safetensors").write_bytes(b"\0" * 64)
    page.get(served(broken))
    assert _wait_state(page, ("ready", "error")) == "error"
    error = page.find_element("id", "error")
    assert error.get_attribute("data-error-name") == "BundleIntegrityError"
    assert "constants.safetensors hash mismatch" in error.text and "re-export" in error.text


@pytest.fixture
def cli_run(capsys):
    """`torch-webgpu ARGS...` in this process: (exit code, stdout, stderr); check=True asserts success."""
    from torch_webgpu.cli.main import main

    def run(*args, check=True):
        code = main([str(a) for a in args])
        out = capsys.readouterr()
        if check:
            assert code == 0, out.err
        return code, out.out, out.err

    return run


def test_readme_example(page, mlp_web, tmp_path):
    """The README's complete HTML page, as written there, next to torch-webgpu.js and mlp.bundle/."""
    from torch_webgpu.web import ASSETS

    readme = (REPO / "README.md").read_text()
    marker = readme.index("test_page.py::test_readme_example")
    start = readme.index("```html\n", marker) + len("```html\n")
    html = readme[start:readme.index("```\n", start)]
    path, model, _ = mlp_web
    site = tmp_path / "readme-site"
    site.mkdir()
    (site / "index.html").write_text(html)
    shutil.copyfile(ASSETS / "torch-webgpu.js", site / "torch-webgpu.js")
    shutil.copytree(path, site / "mlp.bundle")
    server = make_server({"/": site})
    serve_in_thread(server)
    try:
        page.get(f"http://localhost:{server.server_address[1]}/")
        deadline = time.monotonic() + 60
        while page.find_element("id", "out").text == "loading…" and time.monotonic() < deadline:
            time.sleep(0.1)
        lines = page.find_element("id", "out").text.splitlines()
        assert lines[0] == "(x: float32[4, 16]) -> (float32[4, 8])", lines
        assert re.fullmatch(r"float32\[4,8\]: (-?[\d.e-]+,){3}-?[\d.e-]+", lines[1]), lines
    finally:
        server.shutdown()
        server.server_close()


def test_serve_page_runs_an_uploaded_image(page, served, web_root, tmp_path):
    from PIL import Image

    from .conftest import export_model

    path, model, _ = export_model("conv_block", (1, 3, 8, 8), web_root)
    rgb = np.random.default_rng(0).integers(0, 256, (8, 8, 3), dtype=np.uint8)
    Image.fromarray(rgb, "RGB").save(tmp_path / "image.png")
    page.get(served(path))
    assert _wait_state(page, ("ready", "error")) == "ready", page.find_element("id", "error").text
    page.find_element("id", "input-file-0").send_keys(str(tmp_path / "image.png"))
    deadline = time.monotonic() + 10
    while "image.png" not in page.find_element("id", "input-note-0").text and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _click(page, "run") == "ran", page.find_element("id", "error").text
    (y,) = _page_outputs(page)
    x = torch.from_numpy(rgb.transpose(2, 0, 1)[None].astype(np.float32) / 255)
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(y), model(x), atol=1e-4, rtol=1e-4)


def test_serve_page_of_a_zip_bundle(page, served, mlp_web, tmp_path):
    import torch_webgpu

    _, model, x = mlp_web
    path = torch_webgpu.export(model, [torch.from_numpy(x)], tmp_path / "mlp.zip", target="webgpu-core")
    page.get(served(path) + "?run")
    assert _wait_state(page) == "ran", page.find_element("id", "error").text
    assert page.find_element("id", "bundle-name").text == "mlp.zip"
    assert page.find_element("id", "output-0").text.startswith("4x8xf32")


def test_export_web_with_external_weights(page, mlp_web, tmp_path, cli_run):
    from safetensors.torch import save_file

    import torch_webgpu

    _, model, x = mlp_web
    code_only = torch_webgpu.export(model, [torch.from_numpy(x)], tmp_path / "code-only.bundle",
                                    target="webgpu-core", external_weights=True)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(tmp_path / "w.safetensors"))
    site = tmp_path / "site"
    cli_run("export-web", code_only, site, "--weights", tmp_path / "w.safetensors")
    np.save(tmp_path / "x.npy", x)
    server = make_server({"/": site})
    serve_in_thread(server)
    try:
        page.get(f"http://localhost:{server.server_address[1]}/")
        assert _wait_state(page, ("ready", "error")) == "ready", page.find_element("id", "error").text
        page.find_element("id", "input-file-0").send_keys(str(tmp_path / "x.npy"))
        deadline = time.monotonic() + 10
        while "x.npy" not in page.find_element("id", "input-note-0").text and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _click(page, "run") == "ran", page.find_element("id", "error").text
        (y,) = _page_outputs(page)
        with torch.no_grad():
            torch.testing.assert_close(torch.from_numpy(y), model(torch.from_numpy(x)), atol=1e-4, rtol=1e-4)
    finally:
        server.shutdown()
        server.server_close()
