"""The same bundle's time per call in headless Chromium (torch-webgpu.js) and through the Python loader,
on this machine; optionally a screenshot of the `serve` page timing it.

    .venv/bin/python -m benchmarks latency web-vs-python [--calls 20] [--out DIR] [--json FILE]
        [--screenshot docs/serve-page.png]

Bundles: the MLP, CNN block and transformer block of tests/cli/cli_models.py for webgpu-core, with the
kernel library's matmuls and all through IREE (`--library on|off|both`). Both sides
time host arrays in and out (upload, every dispatch, one readback), after 3 warm-up calls. Without a GPU
the browser runs on Chromium's SwiftShader and Python on Dawn over Mesa's lavapipe: different software
rasterisers, so the figures say what each stack costs here, not which GPU code is faster.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from ..json_rows import Option, rows_main

CASES = [("mlp", (4, 16)), ("conv_block", (1, 3, 8, 8)), ("transformer_block", (1, 8, 32))]
WARMUP = 3
TIME_JS = """
const [url, x, shape, calls, warmup] = arguments;
const done = arguments[arguments.length - 1];
import("/torch-webgpu.js").then(async (T) => {
  const start = performance.now();
  const model = await T.load(url);
  const loadMs = performance.now() - start;
  const input = [{data: new Float32Array(x), shape}];
  for (let i = 0; i < warmup; i++) await model.run(input);
  const times = [];
  for (let i = 0; i < calls; i++) {
    const t0 = performance.now();
    await model.run(input);
    times.push(performance.now() - t0);
  }
  const adapter = model.device.adapterInfo;
  model.release(); model.device.destroy();
  done({times, loadMs, adapter: [adapter.vendor, adapter.architecture].join(" ")});
}).catch((e) => done({error: `${e.name}: ${e.message}`}));
"""


def _stats(times_ms: list[float]) -> dict[str, float]:
    return {"median_ms": statistics.median(times_ms), "min_ms": min(times_ms), "max_ms": max(times_ms)}


def export_bundles(directory: Path, library: bool = True) -> list[tuple[str, Path, np.ndarray]]:
    """The benchmark's bundles (webgpu-core) and a seeded input each; `library=False`: every op through
    IREE (TORCH_WEBGPU_LIBRARY=0), no kernel-library dispatches."""
    import torch

    import torch_webgpu
    from tests.cli import cli_models

    out = []
    old = os.environ.get("TORCH_WEBGPU_LIBRARY")
    os.environ["TORCH_WEBGPU_LIBRARY"] = "1" if library else "0"
    try:
        for name, shape in CASES:
            model = getattr(cli_models, name)().eval()
            x = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
            label = name if library else f"{name}-iree-only"
            path = torch_webgpu.export(model, [x], directory / f"{label}.bundle", target="webgpu-core",
                                       source=f"tests/cli/cli_models.py:{name}")
            out.append((label, path, x.numpy()))
    finally:
        if old is None:
            os.environ.pop("TORCH_WEBGPU_LIBRARY")
        else:
            os.environ["TORCH_WEBGPU_LIBRARY"] = old
    return out


def time_python(path: Path, x: np.ndarray, calls: int) -> dict:
    """Per-call time of the Python loader (`torch_webgpu.load(path)(x)`, numpy in and out)."""
    import torch_webgpu

    start = time.perf_counter()
    bundle = torch_webgpu.load(path)
    load_ms = (time.perf_counter() - start) * 1e3
    for _ in range(WARMUP):
        bundle(x)
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        bundle(x)
        times.append((time.perf_counter() - t0) * 1e3)
    return {**_stats(times), "load_ms": load_ms, "adapter": bundle.rt.info.name}


def chromium():
    """Headless Chromium with WebGPU (Selenium, Debian's chromium and chromium-driver)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    from torch_webgpu.web import HEADLESS_CHROMIUM_FLAGS

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for flag in (*HEADLESS_CHROMIUM_FLAGS, "--window-size=1100,1000"):
        options.add_argument(flag)
    service = Service(shutil.which("chromedriver") or "chromedriver")
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_script_timeout(600)
    return driver


def save_screenshot(driver, bundle: Path, path: Path, calls: int) -> None:
    """The `serve` page of `bundle` after timing `calls` calls, saved as a PNG at `path`."""
    from torch_webgpu.cli.web import bundle_mounts, make_server, page_config, serve_in_thread

    server = make_server(bundle_mounts(bundle), page_config(bundle))
    serve_in_thread(server)
    try:
        driver.get(f"http://localhost:{server.server_address[1]}/")
        _wait(driver, ("ready",))
        driver.execute_script(f"window.torchWebGPUPage.bench({calls})")
        _wait(driver, ("ran",))
        height = driver.execute_script("return document.documentElement.scrollHeight")
        # The whole page in one image (a headless window is no taller than its virtual screen).
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                               {"width": 1100, "height": height, "deviceScaleFactor": 1, "mobile": False})
        path.parent.mkdir(parents=True, exist_ok=True)
        driver.get_screenshot_as_file(str(path))
    finally:
        server.shutdown()
        server.server_close()


def _wait(driver, states, timeout=300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = driver.find_element("tag name", "body").get_attribute("data-state")
        if state == "error":
            raise RuntimeError(driver.find_element("id", "error").text)
        if state in states:
            return
        time.sleep(0.1)
    raise TimeoutError(f"the page did not reach {states} in {timeout}s")


def run(calls: int, out: Path | None, screenshot: Path | None, library: str) -> list[dict]:
    """Time every case in both hosts, print a table, write results.json to `out` (and the screenshot)."""
    from torch_webgpu.cli.web import make_server, serve_in_thread
    from torch_webgpu.web import ASSETS

    with tempfile.TemporaryDirectory(prefix="torch-webgpu-web-bench-") as tmp:
        root = Path(tmp)
        (root / "blank.html").write_text("<!doctype html><title>bench</title>")
        bundles = []
        if library in ("on", "both"):
            bundles += export_bundles(root, library=True)
        if library in ("off", "both"):
            bundles += export_bundles(root, library=False)
        server = make_server({"/": ASSETS, "/files/": root})
        serve_in_thread(server)
        base = f"http://localhost:{server.server_address[1]}/files"
        driver = chromium()
        results = []
        try:
            driver.get(f"{base}/blank.html")
            for name, path, x in bundles:
                page = driver.execute_async_script(TIME_JS, f"{base}/{path.name}/", x.ravel().tolist(),
                                                   list(x.shape), calls, WARMUP)
                if "error" in page:
                    raise RuntimeError(f"{name}: {page['error']}")
                manifest = json.loads((path / "manifest.json").read_text())
                results.append({"bundle": name, "dispatches": manifest["dispatches"],
                                "browser": {**_stats(page["times"]), "load_ms": page["loadMs"],
                                            "adapter": page["adapter"]},
                                "python": time_python(path, x, calls)})
            if screenshot:
                save_screenshot(driver, bundles[len(CASES) - 1][1], screenshot, calls)
        finally:
            driver.quit()
            server.shutdown()
    print(f"per call (median of {calls}, ms; host arrays in and out)")
    print(f"{'bundle':<30}{'dispatches':>11}{'browser':>10}{'python':>10}{'browser load':>14}   adapters")
    for r in results:
        print(f"{r['bundle']:<30}{r['dispatches']:>11}{r['browser']['median_ms']:>10.2f}"
              f"{r['python']['median_ms']:>10.2f}{r['browser']['load_ms']:>14.0f}   "
              f"{r['browser']['adapter']} | {r['python']['adapter']}")
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(results, indent=1))
    return results


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Command line: time every case in both hosts (see `run`)."""
    rows_main(run, __doc__, argv, prog, cuda_context=False, calls=20,
              out=Option(None, "write results.json here", Path),
              screenshot=Option(None, "save the serve page (transformer block) as a PNG", Path),
              library=Option("both", "bundles with kernel-library dispatches (on), all through IREE (off), "
                             "or both", choices=("on", "off", "both")))
