"""The browser runtime for bundles: `torch-webgpu.js` (an ES module, no dependencies), its `.d.ts`, and the
page that `torch-webgpu serve` and `torch-webgpu export-web` use. Python here only locates the files."""

from __future__ import annotations

from pathlib import Path

ASSETS = Path(__file__).resolve().parent
RUNTIME = "torch-webgpu.js"
# The files a static page needs (export-web copies them; serve serves them).
PAGE_FILES = ("index.html", "app.js", "page.css", RUNTIME, "torch-webgpu.d.ts")


def asset(name: str) -> Path:
    """The path of one shipped web file (`torch-webgpu.js`, `index.html`, ...)."""
    path = ASSETS / name
    if name not in (*PAGE_FILES, "package.json") or not path.is_file():
        raise FileNotFoundError(f"torch_webgpu/web has no {name}; the package is incomplete — reinstall it")
    return path

# Headless Chromium with WebGPU on a machine without a GPU: its SwiftShader adapter (without the last two
# flags requestAdapter() never resolves there). Used by tests/web and benchmarks/latency/web_vs_python.py.
HEADLESS_CHROMIUM_FLAGS = ("--headless=new", "--no-sandbox", "--enable-unsafe-webgpu",
                           "--enable-unsafe-swiftshader", "--use-webgpu-adapter=swiftshader")
