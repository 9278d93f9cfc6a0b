"""`torch-webgpu serve` and `export-web`: a bundle and the page that runs it in a browser with
torch-webgpu.js, over a local HTTP server or as static files for any web host. A decode bundle gets the
chat page, and with a tokenizer the ES module builds of @huggingface/tokenizers and @huggingface/jinja from
node_modules beside it (its import map names them vendor/...)."""

from __future__ import annotations

import http.server
import json
import shutil
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torch_webgpu.bundle.format import MANIFEST, _read_raw, is_zip, read_manifest
from torch_webgpu.web import ASSETS, CHAT_PAGE, CHAT_PAGE_FILES, PAGE_FILES, text_libraries

_TYPES = {".js": "text/javascript", ".mjs": "text/javascript", ".html": "text/html; charset=utf-8",
          ".css": "text/css", ".json": "application/json", ".wgsl": "text/plain; charset=utf-8",
          ".ts": "text/plain; charset=utf-8", ".npy": "application/octet-stream",
          ".safetensors": "application/octet-stream", ".zip": "application/zip", ".wasm": "application/wasm"}


WEIGHTS = "weights.safetensors"   # where the page finds the weights of a bundle with external weights


def page_config(bundle: Path, weights: Path | None = None) -> dict[str, Any]:
    """config.json of the page: where the bundle (and its external weights) are, relative to the page,
    and its name."""
    config = {"bundle": "bundle.zip" if is_zip(bundle) else "bundle/", "name": bundle.name}
    if weights is not None:
        config["weights"] = WEIGHTS
    return config


class _Handler(http.server.BaseHTTPRequestHandler):
    """GET only, from the server's mounts (URL prefix -> directory or file); nothing else is reachable."""

    server: _Server

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        """Serve one file of a mount, config.json, or 404."""
        path = self.path.split("?", 1)[0].split("#", 1)[0]
        if path == "/":
            path = "/index.html"
        if path == "/config.json" and self.server.config is not None:
            return self._send(json.dumps(self.server.config).encode(), ".json")
        target = self.server.resolve(path)
        if target is None:
            return self.send_error(404, f"{path} is not part of this page")
        self._send(target.read_bytes(), target.suffix)

    def _send(self, body: bytes, suffix: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", _TYPES.get(suffix, "application/octet-stream"))
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")   # a re-exported bundle is picked up on reload
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        if self.server.verbose:
            super().log_message(format, *args)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], mounts: Mapping[str, Path], config: dict | None,
                 verbose: bool):
        super().__init__(address, _Handler)
        # Longest prefix first: /bundle/ wins over /.
        self.mounts = sorted(((p, Path(d).resolve()) for p, d in mounts.items()), key=lambda m: -len(m[0]))
        self.config = config
        self.verbose = verbose

    def resolve(self, url_path: str) -> Path | None:
        """The file a URL path names inside one of the mounts (no `..`, no hidden files), or None."""
        for prefix, root in self.mounts:
            if root.is_file():
                if url_path == prefix:
                    return root
                continue
            if not url_path.startswith(prefix):
                continue
            rest = url_path[len(prefix):]
            parts = [p for p in rest.split("/") if p]
            if not parts or any(p.startswith(".") for p in parts):
                continue
            target = root.joinpath(*parts).resolve()
            if target.is_file() and target.is_relative_to(root):
                return target
        return None


def make_server(mounts: Mapping[str, Path], config: dict | None = None, host: str = "127.0.0.1",
                port: int = 0, verbose: bool = False) -> _Server:
    """An HTTP server (not yet serving) of `mounts` (URL prefix ending in / -> directory, or exact URL ->
    file) plus `config` as /config.json; port 0 picks a free one (`server.server_address`)."""
    return _Server((host, port), mounts, config, verbose)


def _unverified_manifest(bundle: Path) -> dict[str, Any]:
    """The bundle's manifest as it stands, {} where there is none to read: which page to show (the page
    itself verifies the bundle and shows what is wrong with it)."""
    try:
        return _read_raw(Path(bundle))[0]
    except Exception:   # a missing or broken bundle: the page's own load reports it
        return {}


def page_libraries(manifest: dict[str, Any]) -> dict[str, Path]:
    """Page path -> file of the npm packages the bundle's page needs (none unless a decode bundle has a
    tokenizer); FileNotFoundError naming the set-up step when they are not installed."""
    if manifest.get("kind") == "decoder" and (manifest.get("decoder") or {}).get("tokenizer"):
        return text_libraries()
    return {}


def bundle_mounts(bundle: Path, weights: Path | None = None) -> dict[str, Path]:
    """The page's files at / (a decode bundle's: the chat page, and the npm packages its tokenizer needs
    under /vendor/), the bundle at /bundle/ (or /bundle.zip), its external weights (a .safetensors file)
    at /weights.safetensors."""
    mounts: dict[str, Path] = {"/": ASSETS}
    manifest = _unverified_manifest(bundle)
    if manifest.get("kind") == "decoder":
        mounts["/index.html"] = ASSETS / CHAT_PAGE
        for page_path, file in page_libraries(manifest).items():
            mounts[f"/{page_path}"] = file
    if is_zip(bundle):
        mounts["/bundle.zip"] = bundle
    else:
        mounts["/bundle/"] = bundle
    if weights is not None:
        mounts[f"/{WEIGHTS}"] = _weights_file(weights)
    return mounts


def _weights_file(weights: Path) -> Path:
    if not Path(weights).is_file():
        raise FileNotFoundError(f"no weights file {weights} (a .safetensors file of the model's state_dict)")
    return Path(weights)


def serve_in_thread(server: _Server) -> threading.Thread:
    """Serve `server` from a daemon thread (stop with server.shutdown())."""
    thread = threading.Thread(target=server.serve_forever, name="torch-webgpu-serve", daemon=True)
    thread.start()
    return thread


def export_web(bundle: str | Path, directory: str | Path, weights: str | Path | None = None) -> Path:
    """Write the page (a decode bundle's: the chat page and the npm packages its tokenizer needs),
    torch-webgpu.js and a copy of `bundle` (and of its external `weights`) into `directory` (static files
    for any web host); the bundle is verified first."""
    bundle, out = Path(bundle), Path(directory)
    weights = None if weights is None else _weights_file(Path(weights))
    read_manifest(bundle)   # hashes and format version: never publish a corrupted bundle
    if out.exists() and any(out.iterdir()) and not (out / "config.json").exists():
        raise FileExistsError(f"{out} exists, is not empty and not an export-web page; not writing into it")
    manifest = _unverified_manifest(bundle)
    libraries = page_libraries(manifest)   # before writing anything: the packages may be missing
    out.mkdir(parents=True, exist_ok=True)
    chat = manifest.get("kind") == "decoder"
    for name in CHAT_PAGE_FILES if chat else PAGE_FILES:
        shutil.copyfile(ASSETS / name, out / ("index.html" if name == CHAT_PAGE else name))
    if (out / "vendor").is_dir():
        shutil.rmtree(out / "vendor")
    for page_path, file in libraries.items():
        (out / page_path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(file, out / page_path)
    for old in (out / "bundle", out / "bundle.zip"):
        if old.is_dir():
            shutil.rmtree(old)
        elif old.exists():
            old.unlink()
    if is_zip(bundle):
        shutil.copyfile(bundle, out / "bundle.zip")
    else:
        (out / "bundle").mkdir()
        names = [MANIFEST, *json.loads((bundle / MANIFEST).read_text()).get("files", {})]
        for name in names:
            shutil.copyfile(bundle / name, out / "bundle" / name)
    if weights is not None:
        shutil.copyfile(weights, out / WEIGHTS)
    elif (out / WEIGHTS).exists():
        (out / WEIGHTS).unlink()
    (out / "config.json").write_text(json.dumps(page_config(bundle, weights), indent=1))
    return out
