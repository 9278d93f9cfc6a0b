"""The shipped web files agree with each other: every file the page needs is in the package, the module's
exports are declared in its .d.ts, and the npm package's version is the Python package's."""

import json
import re
from pathlib import Path

from torch_webgpu.web import ASSETS, CHAT_PAGE_FILES, PAGE_FILES, RUNTIME, TEXT_LIBRARIES, asset

REPO = Path(__file__).resolve().parents[2]


def _exports(text: str) -> set[str]:
    return set(re.findall(r"^export (?:async )?(?:function|class|const) (\w+)", text, re.M))


def test_page_files_are_in_the_package():
    for name in (*PAGE_FILES, "package.json"):
        assert asset(name).stat().st_size > 0, name
    html = asset("index.html").read_text()
    assert 'src="app.js"' in html and 'href="page.css"' in html
    assert 'from "./torch-webgpu.js"' in asset("app.js").read_text()


def test_chat_page_files_are_in_the_package_and_map_the_text_libraries():
    for name in CHAT_PAGE_FILES:
        assert asset(name).stat().st_size > 0, name
    html = asset("chat.html").read_text()
    assert 'src="chat.js"' in html and 'href="page.css"' in html
    importmap = re.search(r'<script type="importmap">(.*?)</script>', html, re.S).group(1)
    imports = json.loads(importmap)["imports"]
    assert imports == {package: f"./{page_path}" for package, (_, page_path) in TEXT_LIBRARIES.items()}


def test_every_export_is_declared():
    js = _exports(asset(RUNTIME).read_text())
    declared = _exports(asset("torch-webgpu.d.ts").read_text().replace("export declare ", "export "))
    assert {"load", "Model", "BundleIntegrityError", "parseSafetensors"} <= js
    assert js - declared == set(), f"exported by {RUNTIME} but not declared in torch-webgpu.d.ts"


def test_versions_agree():
    package = json.loads((ASSETS / "package.json").read_text())
    version = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M).group(1)
    js_version = re.search(r'^export const VERSION = "([^"]+)";', asset(RUNTIME).read_text(), re.M).group(1)
    assert package["version"] == js_version == version
    assert package["main"] == f"./{RUNTIME}" and package["types"] == "./torch-webgpu.d.ts"
    # the text libraries are dependencies (a decode bundle's tokenizer), Dawn for Node only for the Node runs
    assert set(package["dependencies"]) == set(TEXT_LIBRARIES)
    assert set(package["devDependencies"]) == {"webgpu"}
    lock = json.loads((ASSETS / "package-lock.json").read_text())
    assert lock["packages"][""]["dependencies"] == package["dependencies"]
    assert lock["packages"][""]["devDependencies"] == package["devDependencies"]
    assert all(f"node_modules/{name}" in lock["packages"] for name in (*TEXT_LIBRARIES, "webgpu"))
