"""Browser fixtures: one headless Chromium (WebGPU on its SwiftShader adapter) driven by Selenium for the
session, a local server of torch-webgpu.js and the test bundles, and helpers that run a bundle in the page;
the tiny language models' decode bundles (tests/language_models.py) exported under the server's root, a
page whose import map finds the tokenizer libraries, and Node with Dawn for Node (the npm package `webgpu`).

Never skipped: a machine without Chromium, chromedriver, node or the npm packages fails here with the
set-up step to run.
"""

import base64
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from torch_webgpu.web import HEADLESS_CHROMIUM_FLAGS

# SwiftShader on a machine without a GPU; on a machine with one it keeps the tests deterministic.
CHROMIUM_FLAGS = (*HEADLESS_CHROMIUM_FLAGS, "--window-size=1100,1000")
SETUP = "install them with tools/setup_system.sh (Debian: apt-get install chromium chromium-driver)"
# Runs one bundle in the page: load, run on the given inputs, release; returns outputs or the error.
RUN_JS = """
const [url, inputs, done] = [arguments[0], arguments[1], arguments[arguments.length - 1]];
(async () => {
  const T = await import("/torch-webgpu.js");
  const CLASSES = {float32: Float32Array, int32: Int32Array, int64: BigInt64Array, bool: Uint8Array,
                   uint8: Uint8Array, int8: Int8Array, int16: Int16Array, float64: Float64Array};
  const decode = (v) => {
    const bytes = Uint8Array.from(atob(v.b64), (c) => c.charCodeAt(0));
    return {data: new CLASSES[v.dtype](bytes.buffer), shape: v.shape, dtype: v.dtype};
  };
  const encode = (o) => (o === null || typeof o !== "object") ? o
    : {data: Array.from(o.data, Number), shape: o.shape, dtype: o.dtype};
  let model = null;
  try {
    model = await T.load(url);
    const outputs = await model.run(inputs.map(decode));
    done({outputs: outputs.map(encode), signature: model.signature});
  } catch (exc) {
    done({error: {name: exc.name, message: String(exc.message)}});
  } finally {
    if (model) { model.release(); model.device.destroy(); }
  }
})();
"""


def _chromium() -> tuple[str, str]:
    browser = (os.environ.get("TORCH_WEBGPU_CHROMIUM") or shutil.which("chromium")
               or shutil.which("chromium-browser"))
    driver = os.environ.get("TORCH_WEBGPU_CHROMEDRIVER") or shutil.which("chromedriver")
    if not browser or not driver:
        missing = " and ".join(n for n, p in (("chromium", browser), ("chromedriver", driver)) if not p)
        pytest.fail(f"the browser tests need {missing}; {SETUP}", pytrace=False)
    return browser, driver


@pytest.fixture(scope="session")
def browser():
    """Headless Chromium with WebGPU, shared by the session's browser tests."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("the browser tests need selenium: pip install -e '.[test]'", pytrace=False)
    binary, driver_path = _chromium()
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(driver_path))
    driver.set_script_timeout(180)
    yield driver
    driver.quit()


@pytest.fixture(scope="session")
def web_root(tmp_path_factory):
    """The directory the test server shows at /files/ (bundles and a blank page live there)."""
    root = tmp_path_factory.mktemp("web-root")
    (root / "blank.html").write_text("<!doctype html><title>torch-webgpu tests</title>")
    return root


@pytest.fixture(scope="session")
def web_server(web_root):
    """Base URL of a local server of torch-webgpu.js (at /), `web_root` (at /files/) and, where they are
    installed, the tokenizer libraries (at /vendor/, as the chat page's import map names them)."""
    from torch_webgpu.cli.web import make_server, serve_in_thread
    from torch_webgpu.web import ASSETS, text_libraries

    mounts = {"/": ASSETS, "/files/": web_root}
    try:
        mounts.update({f"/{page_path}": file for page_path, file in text_libraries().items()})
    except FileNotFoundError:
        pass   # the language-model fixtures fail with the set-up step; the other tests need none
    server = make_server(mounts)
    serve_in_thread(server)
    yield f"http://localhost:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def page(browser, web_server):
    """The browser on a blank page of the test server (a secure context: WebGPU and crypto.subtle)."""
    browser.get(f"{web_server}/files/blank.html")
    available = browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "(navigator.gpu ? navigator.gpu.requestAdapter() : Promise.resolve(null))"
        ".then((a) => done(a ? a.info.architecture || a.info.vendor || 'adapter' : null),"
        " () => done(null));")
    if not available:
        pytest.fail(f"Chromium gave no WebGPU adapter with {' '.join(CHROMIUM_FLAGS)}", pytrace=False)
    return browser


@pytest.fixture(scope="session")
def run_in_page(page, web_server, web_root):
    """run(bundle_dir, inputs) -> the page's {outputs: [...]} or {error: {name, message}}; the bundle
    directory must be under `web_root`."""

    def run(bundle: Path, inputs: list[np.ndarray]) -> dict:
        if page.current_url != f"{web_server}/files/blank.html":
            page.get(f"{web_server}/files/blank.html")
        url = f"{web_server}/files/{Path(bundle).relative_to(web_root).as_posix()}/"
        encoded = [{"b64": base64.b64encode(np.ascontiguousarray(x).tobytes()).decode(),
                    "shape": list(x.shape), "dtype": str(x.dtype)} for x in inputs]
        return page.execute_async_script(RUN_JS, url, encoded)

    return run


@pytest.fixture(scope="session", autouse=True)
def _compile_cache(tmp_path_factory):
    old = os.environ.get("TORCH_WEBGPU_CACHE_DIR")
    os.environ["TORCH_WEBGPU_CACHE_DIR"] = str(tmp_path_factory.mktemp("web-compile-cache"))
    yield
    if old is None:
        os.environ.pop("TORCH_WEBGPU_CACHE_DIR", None)
    else:
        os.environ["TORCH_WEBGPU_CACHE_DIR"] = old


def export_model(name: str, shape: tuple[int, ...], web_root: Path) -> tuple[Path, object, np.ndarray]:
    """A model of tests/cli/cli_models.py exported for webgpu-core under `web_root`, and a seeded input."""
    import torch

    import torch_webgpu
    from tests.cli import cli_models

    model = getattr(cli_models, name)().eval()
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(1))
    path = torch_webgpu.export(model, [x], web_root / f"{name}.bundle", target="webgpu-core")
    return path, model, x.numpy()


@pytest.fixture(scope="session")
def mlp_web(web_root):
    """The MLP bundle (webgpu-core), its model and an input."""
    return export_model("mlp", (4, 16), web_root)


NPM_SETUP = "run tools/setup_node.sh (npm ci in torch_webgpu/web; ./dev.sh does it)"


@pytest.fixture(scope="session")
def build_web_language_model(web_root):
    """(kind, quant) -> tests/language_models.py's tiny model with its decode bundle exported under
    `web_root`/lm (served at /files/lm/<kind>-<quant>/), each built once per session."""
    from tests.language_models import build_language_model

    built = {}

    def build(kind: str, quant: str):
        if (kind, quant) not in built:
            built[kind, quant] = build_language_model(kind, quant, web_root / "lm")
        return built[kind, quant]

    return build


@pytest.fixture(scope="session")
def f16_language_bundle(build_web_language_model, web_root):
    """The tiny Llama in float16 as a decode bundle with its tokenizer, compiled for webgpu-core's limits
    plus shader-f16 (which it then requires)."""
    import copy
    import json

    import torch

    import torch_webgpu
    from torch_webgpu.bundle.requirements import WEBGPU_CORE_LIMITS

    target = web_root / "webgpu-core-f16.json"   # an adapter file (`torch-webgpu adapter --json`'s form)
    target.write_text(json.dumps({"limits": WEBGPU_CORE_LIMITS, "features": ["shader-f16"]}))
    lm = build_web_language_model("llama", "f32")
    half = copy.deepcopy(lm.model).to(torch.float16)
    return torch_webgpu.export_decoder(half, web_root / "lm" / "llama-f16", tokenizer=lm.tokenizer,
                                       max_len=32, prompt_buckets=(8,), f16=True, target=str(target))


@pytest.fixture(scope="session")
def lm_page(page, web_server, web_root):
    """The browser on a page of the test server whose import map gives @huggingface/tokenizers and
    @huggingface/jinja (what the chat page's does): a decode bundle with a tokenizer loads there."""
    import json

    from torch_webgpu.web import TEXT_LIBRARIES, text_libraries

    try:
        text_libraries()
    except FileNotFoundError as exc:
        pytest.fail(f"{exc}; {NPM_SETUP}", pytrace=False)
    imports = {package: f"/{page_path}" for package, (_, page_path) in TEXT_LIBRARIES.items()}
    (web_root / "lm.html").write_text('<!doctype html><title>torch-webgpu language models</title>'
                                      f'<script type="importmap">{json.dumps({"imports": imports})}</script>')
    page.get(f"{web_server}/files/lm.html")
    return page


# Runs `ops` on one decode bundle in the page: load it, then each op (generate, encode, ...); returns
# {op name: {value} or {error: {name, message}}}, or {load_error: {name, message}}.
LM_JS = """
const [url, ops, done] = [arguments[0], arguments[1], arguments[arguments.length - 1]];
const error = (e) => ({name: e.name, message: String(e.message)});
(async () => {
  const T = await import("/torch-webgpu.js");
  let lm;
  try {
    lm = await T.load(url);
  } catch (e) {
    done({load_error: error(e)});
    return;
  }
  const all = async (stream) => { const out = []; for await (const x of stream) out.push(x); return out; };
  const results = {};
  for (const op of ops) {
    try {
      const t = lm.tokenizer;
      let value;
      switch (op.kind) {
        case "ids": value = await all(lm.generateIds(op.prompt, op.options)); break;
        case "text": value = await all(lm.generate(op.prompt, op.options)); break;
        case "chat": value = await all(lm.chat(op.messages, op.options)); break;
        case "encode": value = t.encode(op.text, op.options); break;
        case "decode": value = t.decode(op.ids, op.options); break;
        case "template": value = t.applyChatTemplate(op.messages, op.options); break;
        case "info": value = {maxLen: lm.maxLen, buckets: lm.buckets, vocabSize: lm.vocabSize,
                              eos: lm.eosTokenIds, tokenizer: t !== null}; break;
        default: throw new Error(`unknown op ${op.kind}`);
      }
      results[op.name] = {value, stats: lm.stats};
    } catch (e) {
      results[op.name] = {error: error(e)};
    }
  }
  lm.release();
  done(results);
})().catch((e) => done({load_error: error(e)}));
"""


@pytest.fixture(scope="session")
def run_lm_in_page(lm_page, web_server, web_root):
    """run(bundle_dir, ops) -> LM_JS's results for a decode bundle under `web_root`."""

    def run(bundle: Path, ops: list[dict]) -> dict:
        if lm_page.current_url != f"{web_server}/files/lm.html":
            lm_page.get(f"{web_server}/files/lm.html")
        url = f"{web_server}/files/{Path(bundle).relative_to(web_root).as_posix()}/"
        return lm_page.execute_async_script(LM_JS, url, ops)

    return run


@pytest.fixture(scope="session")
def node():
    """The node binary, after checking Dawn for Node and the tokenizer libraries import under it."""
    import subprocess

    from torch_webgpu.web import ASSETS

    binary = os.environ.get("TORCH_WEBGPU_NODE") or shutil.which("node")
    if not binary:
        pytest.fail(f"the Node tests need node; {SETUP.replace('chromium chromium-driver', 'nodejs npm')}",
                    pytrace=False)
    probe = subprocess.run([binary, "--input-type=module", "-e", "await import('webgpu'); "
                            "await import('@huggingface/tokenizers'); await import('@huggingface/jinja');"],
                           cwd=ASSETS, capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        pytest.fail(f"node cannot import torch-webgpu.js's npm packages ({probe.stderr.strip()[-300:]}); "
                    f"{NPM_SETUP}", pytrace=False)
    return binary
