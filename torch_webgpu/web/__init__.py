"""The browser runtime for bundles: `torch-webgpu.js` (an ES module), its `.d.ts`, and the pages that
`torch-webgpu serve` and `torch-webgpu export-web` use (a bundle's page; a decode bundle's chat page). Python
here only locates the files: the shipped ones, and the npm packages a decode bundle's tokenizer needs in a
page (installed by `npm ci` here, never committed)."""

from __future__ import annotations

from pathlib import Path

from torch_webgpu.config import NODE_MODULES

ASSETS = Path(__file__).resolve().parent
RUNTIME = "torch-webgpu.js"
# The files a static page needs (export-web copies them; serve serves them).
PAGE_FILES = ("index.html", "app.js", "page.css", RUNTIME, "torch-webgpu.d.ts")
# The chat page of a decode bundle: chat.html is its index.html.
CHAT_PAGE = "chat.html"
CHAT_PAGE_FILES = (CHAT_PAGE, "chat.js", "page.css", RUNTIME, "torch-webgpu.d.ts")
NODE_MODULES_ENV = NODE_MODULES.name
# npm package -> (its ES module build under node_modules, the path the chat page's import map gives it)
TEXT_LIBRARIES = {
    "@huggingface/tokenizers": ("@huggingface/tokenizers/dist/tokenizers.mjs",
                                "vendor/huggingface-tokenizers.mjs"),
    "@huggingface/jinja": ("@huggingface/jinja/dist/index.js", "vendor/huggingface-jinja.js"),
}


def asset(name: str) -> Path:
    """The path of one shipped web file (`torch-webgpu.js`, `index.html`, ...)."""
    path = ASSETS / name
    if name not in (*PAGE_FILES, *CHAT_PAGE_FILES, "package.json") or not path.is_file():
        raise FileNotFoundError(f"torch_webgpu/web has no {name}; the package is incomplete — reinstall it")
    return path


def node_modules() -> Path:
    """The node_modules holding torch-webgpu.js's npm packages: $TORCH_WEBGPU_NODE_MODULES, else
    torch_webgpu/web/node_modules (what `npm ci` there installs)."""
    return NODE_MODULES.read() or ASSETS / "node_modules"


def text_libraries() -> dict[str, Path]:
    """Page path (vendor/...) -> the installed ES module build of each npm package a decode bundle's
    tokenizer needs in a page; FileNotFoundError naming the set-up step when one is not installed."""
    root = node_modules()
    found, missing = {}, []
    for package, (build, page_path) in TEXT_LIBRARIES.items():
        if (root / build).is_file():
            found[page_path] = root / build
        else:
            missing.append(package)
    if missing:
        raise FileNotFoundError(
            f"a decode bundle's tokenizer needs the npm packages {' and '.join(missing)} in its page, and "
            f"{root} does not have them: run `npm ci` in torch_webgpu/web (the README's set-up does), or set "
            f"{NODE_MODULES_ENV} to a node_modules directory that has them")
    return found

# Headless Chromium with WebGPU on a machine without a GPU: its SwiftShader adapter (without the last two
# flags requestAdapter() never resolves there). Used by tests/web and benchmarks/latency/web_vs_python.py.
HEADLESS_CHROMIUM_FLAGS = ("--headless=new", "--no-sandbox", "--enable-unsafe-webgpu",
                           "--enable-unsafe-swiftshader", "--use-webgpu-adapter=swiftshader")
