"""torch-webgpu.js in headless Chromium: bundles compiled for webgpu-core match torch CPU, and bad bundles or
inputs give the Python loader's errors, word for word."""

import json
import shutil

import numpy as np
import pytest
import torch

import torch_webgpu
from tests.bundle.conftest import edit_manifest
from torch_webgpu.bundle import BundleFormatError, BundleIntegrityError, BundleSignatureError
from torch_webgpu.bundle.format import sha256
from torch_webgpu.bundle.requirements import check_requirements

from .conftest import export_model

ATOL = RTOL = 1e-4


def _outputs(result: dict) -> list[torch.Tensor]:
    assert "error" not in result, f"the page raised {result['error']}"
    return [torch.tensor(o["data"], dtype=getattr(torch, o["dtype"])).reshape(o["shape"])
            for o in result["outputs"]]


def _error(result: dict) -> tuple[str, str]:
    assert "error" in result, f"the page ran the bundle: {result}"
    return result["error"]["name"], result["error"]["message"]


def _page_error(result: dict, url_path: str, fs_path) -> tuple[str, str]:
    """The page's error name and message, with the bundle URL written as the Python loader's path."""
    name, message = _error(result)
    start = message.find("http://")
    if start >= 0:
        end = message.index(url_path) + len(url_path)
        message = message[:start] + str(fs_path) + message[end:]
    return name, message


@pytest.mark.parametrize("name, shape", [("mlp", (4, 16)), ("conv_block", (1, 3, 8, 8)),
                                         ("transformer_block", (1, 8, 32))])
def test_bundle_matches_torch_in_browser_and_python(name, shape, run_in_page, web_root):
    path, model, x = export_model(name, shape, web_root)
    with torch.no_grad():
        expected = model(torch.from_numpy(x))
    (browser_out,) = _outputs(run_in_page(path, [x]))
    torch.testing.assert_close(browser_out, expected, atol=ATOL, rtol=RTOL)
    # The same bundle files through the Python loader.
    torch.testing.assert_close(torch.from_numpy(torch_webgpu.load(path)(x)), expected, atol=ATOL, rtol=RTOL)


def test_signature_matches_python(mlp_web, run_in_page):
    path, _, x = mlp_web
    assert run_in_page(path, [x])["signature"] == torch_webgpu.load(path).signature


def test_zip_bundle(mlp_web, run_in_page, web_root, page, web_server):
    _, model, x = mlp_web
    path = torch_webgpu.export(model, [torch.from_numpy(x)], web_root / "mlp.zip", target="webgpu-core")
    url = f"{web_server}/files/mlp.zip"
    result = page.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "import('/torch-webgpu.js').then(async (T) => { const m = await T.load(arguments[0]);"
        "const [y] = await m.run([new Float32Array(arguments[1])]); m.release(); m.device.destroy();"
        "done(Array.from(y.data)); }).catch((e) => done(String(e)));", url, x.ravel().tolist())
    assert isinstance(result, list), result
    with torch.no_grad():
        torch.testing.assert_close(torch.tensor(result).reshape(4, 8), model(torch.from_numpy(x)),
                                   atol=ATOL, rtol=RTOL)
    assert path.is_file()


def test_corrupted_file_gives_the_loaders_error(mlp_web, run_in_page, web_root):
    path, _, x = mlp_web
    broken = shutil.copytree(path, web_root / "corrupted.bundle")
    wgsl = next(broken.glob("*.wgsl"))
    wgsl.write_text(wgsl.read_text().replace("0u", "1u", 1))
    with pytest.raises(BundleIntegrityError) as python_error:
        torch_webgpu.load(broken)
    name, message = _page_error(run_in_page(broken, [x]), "corrupted.bundle", broken)
    assert (name, message) == ("BundleIntegrityError", str(python_error.value))
    assert "hash mismatch" in message


def test_edited_manifest_gives_the_loaders_error(mlp_web, run_in_page, web_root):
    path, _, x = mlp_web
    edited = shutil.copytree(path, web_root / "edited.bundle")
    edit_manifest(edited, lambda m: m["outputs"][0].update(shape=[4, 9]), reseal=False)
    with pytest.raises(BundleIntegrityError) as python_error:
        torch_webgpu.load(edited)
    assert _page_error(run_in_page(edited, [x]), "edited.bundle", edited) == \
        ("BundleIntegrityError", str(python_error.value))


def test_resealed_manifest_with_unicode_and_floats_verifies(mlp_web, run_in_page, web_root):
    # The manifest's self-hash covers Python's canonical JSON (ensure_ascii escapes, floats as repr):
    # the page must rebuild exactly those bytes.
    path, model, x = mlp_web
    edited = shutil.copytree(path, web_root / "unicode.bundle")
    note = {"z": 1.0, "a": [1e-07, 2.5, -0.0]}
    edit_manifest(edited, lambda m: m.update(source="modèle ✓ \"q\"\n.py", note=note))
    (out,) = _outputs(run_in_page(edited, [x]))
    with torch.no_grad():
        torch.testing.assert_close(out, model(torch.from_numpy(x)), atol=ATOL, rtol=RTOL)


def test_format_version_gives_the_loaders_error(mlp_web, run_in_page, web_root):
    path, _, x = mlp_web
    future = shutil.copytree(path, web_root / "future.bundle")
    edit_manifest(future, lambda m: m.update(format_version=2))
    with pytest.raises(BundleFormatError) as python_error:
        torch_webgpu.load(future)
    assert _page_error(run_in_page(future, [x]), "future.bundle", future) == \
        ("BundleFormatError", str(python_error.value))


def test_wrong_input_shape_gives_the_loaders_error(mlp_web, run_in_page):
    path, _, x = mlp_web
    wrong = np.zeros((4, 15), np.float32)
    with pytest.raises(BundleSignatureError) as python_error:
        torch_webgpu.load(path)(wrong)
    name, message = _error(run_in_page(path, [wrong]))
    assert (name, message) == ("BundleSignatureError", str(python_error.value))
    assert "float32[4, 15], expected float32[4, 16]" in message


def test_wrong_dtype_and_count_give_the_loaders_errors(mlp_web, run_in_page):
    path, _, x = mlp_web
    bundle = torch_webgpu.load(path)
    for args in ([x.astype(np.int32)], [x, x]):
        with pytest.raises(BundleSignatureError) as python_error:
            bundle(*args)
        assert _error(run_in_page(path, args)) == ("BundleSignatureError", str(python_error.value))


def test_missing_feature_gives_the_loaders_error(mlp_web, run_in_page, page, web_root):
    path, _, x = mlp_web
    needy = shutil.copytree(path, web_root / "needs-f16.bundle")
    edit_manifest(needy, lambda m: m["requires"]["features"].append("shader-f16"))
    adapter = page.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "Promise.all([import('/torch-webgpu.js'), navigator.gpu.requestAdapter()]).then(([T, a]) => done("
        "{limits: T.limitsOf(a, a.info), features: [...a.features],"
        " name: [a.info.vendor, a.info.architecture].filter((s) => s).join(' ')}));")
    assert "shader-f16" not in adapter["features"], "SwiftShader was expected to lack shader-f16"
    requires = json.loads((needy / "manifest.json").read_text())["requires"]
    with pytest.raises(Exception) as python_error:   # the Python loader's check, given the page's adapter
        check_requirements(requires, adapter["limits"], adapter["features"],
                           what=f"this adapter ({adapter['name']})")
    name, message = _error(run_in_page(needy, [x]))
    assert (name, message) == ("BundleRequirementError", str(python_error.value))
    assert "feature 'shader-f16'" in message


def test_host_expressions_match_python(page):
    from torch_webgpu.plan import host_expr

    exprs = [["ceildivsi", ["muli", ["dim", 0, 1], 3], 4], ["divsi", -7, ["dim", 1, 0]],
             ["remsi", -7, 2], ["remui", 7, ["dim", 0, 0]], ["floordivsi", -7, 2],
             ["align", ["dim", 0, 1], 64],
             ["select", ["cmp.slt", ["dim", 0, 0], 3], 10, 20], ["trunci", ["subi", 0, 1]],
             ["shli", ["dim", 0, 1], 33], ["andi", ["dim", 1, 0], 6], ["maxsi", -2, ["minui", 9, 4]]]
    shapes = [[2, 77], [3]]
    got = page.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "import('/torch-webgpu.js').then((T) => done(arguments[0].map((e) => T.evaluate(e, arguments[1]))));",
        exprs, shapes)
    assert got == [host_expr.evaluate(e, shapes) for e in exprs]


class _Embed(torch.nn.Module):
    """int64 and bool across the boundary: both in, both out."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 4)

    def forward(self, ids, mask):
        return self.emb(ids) * mask.unsqueeze(-1), ids * 2 + 1, ids > 4


def test_int64_and_bool_cross_the_boundary(run_in_page, web_root):
    torch.manual_seed(0)
    model = _Embed().eval()
    ids = torch.tensor([[1, 5, 9, 0], [3, 3, 7, 2]])
    mask = torch.tensor([[True, False, True, True], [False, True, True, False]])
    path = torch_webgpu.export(model, [ids, mask], web_root / "embed.bundle", target="webgpu-core")
    outs = _outputs(run_in_page(path, [ids.numpy(), mask.numpy()]))
    with torch.no_grad():
        expected = model(ids, mask)
    assert [o.dtype for o in outs] == [torch.float32, torch.int64, torch.bool]
    for got, want in zip(outs, expected, strict=True):
        torch.testing.assert_close(got, want, atol=ATOL, rtol=RTOL)
    # Beyond int32: the page refuses as the Python executor does (WGSL has no 64-bit integers).
    big = np.full((2, 4), 2**40, np.int64)
    assert _error(run_in_page(path, [big, mask.numpy()]))[0] == "RangeError"


class _Double(torch.nn.Module):
    def forward(self, x):
        return x * 2 + 1


def test_float64_is_demoted_at_the_boundary(run_in_page, web_root):
    x = torch.randn(3, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    path = torch_webgpu.export(_Double(), [x], web_root / "double.bundle", target="webgpu-core")
    (out,) = _outputs(run_in_page(path, [x.numpy()]))
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, x * 2 + 1, atol=1e-5, rtol=1e-5)


class _Square(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, x):
        return torch.tanh(self.lin(x))


CHAIN_JS = """
const [url, x, done] = [arguments[0], arguments[1], arguments[arguments.length - 1]];
import("/torch-webgpu.js").then(async (T) => {
  const model = await T.load(url);
  const [onDevice] = await model.run({x: new Float32Array(x)}, {output: "gpu"});
  const [twice] = await model.run([onDevice.buffer]);               // a GPUBuffer in: zero-copy
  const [again] = await model.run([{buffer: onDevice.buffer, shape: [4, 16]}]);
  const kinds = [onDevice.buffer instanceof GPUBuffer, onDevice.deviceDtype, onDevice.shape];
  onDevice.buffer.destroy(); model.release(); model.device.destroy();
  done({twice: Array.from(twice.data), again: Array.from(again.data), kinds});
}).catch((e) => done({error: String(e)}));
"""


def test_gpu_buffers_chain_calls_without_readback(page, web_root):
    torch.manual_seed(0)
    model = _Square().eval()
    x = torch.randn(4, 16)
    path = torch_webgpu.export(model, [x], web_root / "square.bundle", target="webgpu-core")
    url = page.current_url.replace("blank.html", f"{path.name}/")
    result = page.execute_async_script(CHAIN_JS, url, x.ravel().tolist())
    assert "error" not in result, result
    assert result["kinds"] == [True, "float32", [4, 16]]
    with torch.no_grad():
        expected = model(model(x))
    for key in ("twice", "again"):
        torch.testing.assert_close(torch.tensor(result[key]).reshape(4, 16), expected, atol=ATOL, rtol=RTOL)


EXTERNAL_JS = """
const [url, weightsUrl, x] = arguments;
const done = arguments[arguments.length - 1];
import("/torch-webgpu.js").then(async (T) => {
  const errors = [];
  try { await T.load(url); } catch (e) { errors.push(e.name); }
  const weights = await (await fetch(weightsUrl)).arrayBuffer();
  const model = await T.load(url, {weights});
  const [y] = await model.run([new Float32Array(x)]);
  model.release(); model.device.destroy();
  done({y: Array.from(y.data), errors});
}).catch((e) => done({error: String(e)}));
"""


def test_external_weights_from_a_safetensors_file(mlp_web, page, web_root):
    from safetensors.torch import save_file

    _, model, x = mlp_web
    path = torch_webgpu.export(model, [torch.from_numpy(x)], web_root / "code-only.bundle",
                               target="webgpu-core", external_weights=True)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(web_root / "mlp.safetensors"))
    base = page.current_url.replace("blank.html", "")
    result = page.execute_async_script(EXTERNAL_JS, f"{base}{path.name}/", f"{base}mlp.safetensors",
                                       x.ravel().tolist())
    assert "error" not in result, result
    assert result["errors"] == ["BundleSignatureError"]   # no weights given
    with torch.no_grad():
        torch.testing.assert_close(torch.tensor(result["y"]).reshape(4, 8), model(torch.from_numpy(x)),
                                   atol=ATOL, rtol=RTOL)


VARIANTS_JS = """
const [url, x] = arguments;
const done = arguments[arguments.length - 1];
import("/torch-webgpu.js").then(async (T) => {
  localStorage.removeItem("torch-webgpu-autotune");
  const tuned = {autotune: true, autotuneMinFlops: 0, autotuneCandidates: 2};
  const out = [];
  for (const options of [{}, tuned, tuned]) {
    const model = await T.load(url, options);
    const [y] = await model.run([new Float32Array(x)]);
    out.push({variants: model.variants, y: Array.from(y.data)});
    model.release();
  }
  localStorage.removeItem("torch-webgpu-autotune");
  done(out);
}).catch((e) => done({error: `${e.name}: ${e.message}`}));
"""


def test_library_variants_default_on_swiftshader_timed_on_request(mlp_web, page):
    # Library dispatches carry their variants; like the Python executor the page keeps the defaults on a
    # software adapter, and with autotune it times them, runs the fastest and caches it.
    path, model, x = mlp_web
    main = json.loads((path / "manifest.json").read_text())["plan"]["main"]
    tunable = [n["tune"] for n in main if "tune" in n]
    assert tunable, "the MLP's matmuls were expected to carry variants"
    url = page.current_url.replace("blank.html", f"{path.name}/")
    runs = page.execute_async_script(VARIANTS_JS, url, x.ravel().tolist())
    assert "error" not in runs, runs
    runs.append(page.execute_async_script(VARIANTS_JS.replace("[{}, tuned, tuned]", "[tuned, {}]"), url,
                                          x.ravel().tolist())[1])   # a cached winner, autotune off
    defaults = {t["variants"][0]["entry_point"] for t in tunable}
    for run in (runs[0], runs[3]):   # a software adapter keeps the defaults, cached winners or not
        assert set(run["variants"]) == defaults
        assert all(v["how"] == "default" for v in run["variants"].values())
    for run, how in ((runs[1], "timed"), (runs[2], "cached")):
        assert len(run["variants"]) == len(tunable)
        for choice, tune in zip(run["variants"].values(), tunable, strict=True):
            assert choice["how"] == how and choice["variant"] in [v["variant"] for v in tune["variants"][:2]]
        assert all(len(c["timings"]) == 2 for c in runs[1]["variants"].values())
    with torch.no_grad():
        expected = model(torch.from_numpy(x))
    for run in runs:
        torch.testing.assert_close(torch.tensor(run["y"]).reshape(4, 8), expected, atol=ATOL, rtol=RTOL)


STALE_WINNER_JS = """
const [url, x, stale] = arguments;
const done = arguments[arguments.length - 1];
import("/torch-webgpu.js").then(async (T) => {
  localStorage.removeItem("torch-webgpu-autotune");
  const tuned = {autotune: true, autotuneMinFlops: 0, autotuneCandidates: 2};
  const out = [];
  for (let i = 0; i < 2; i++) {
    if (i === 1) {   // every cached winner renamed to a name the library no longer has
      const entries = JSON.parse(localStorage.getItem("torch-webgpu-autotune"));
      for (const key of Object.keys(entries)) entries[key] = stale;
      localStorage.setItem("torch-webgpu-autotune", JSON.stringify(entries));
    }
    const model = await T.load(url, tuned);
    const [y] = await model.run([new Float32Array(x)]);
    out.push({variants: model.variants, y: Array.from(y.data),
              cached: Object.values(JSON.parse(localStorage.getItem("torch-webgpu-autotune")))});
    model.release();
  }
  localStorage.removeItem("torch-webgpu-autotune");
  done(out);
}).catch((e) => done({error: `${e.name}: ${e.message}`}));
"""


def test_a_cached_winner_the_bundle_no_longer_names_is_timed_again(mlp_web, page):
    # Winners are cached in localStorage by variant name; a name from before a rename (issue 40 gave the
    # packed tensor-core tiles their ".rot") is not among a bundle's variants, so the page times them again
    # and caches the new winner instead of failing or running nothing.
    path, model, x = mlp_web
    main = json.loads((path / "manifest.json").read_text())["plan"]["main"]
    tunable = [n["tune"] for n in main if "tune" in n]
    stale = "sgmat.w4x4.f2x4.k32.pl.o4.p16"
    assert tunable and all(stale not in [v["variant"] for v in t["variants"]] for t in tunable)
    url = page.current_url.replace("blank.html", f"{path.name}/")
    runs = page.execute_async_script(STALE_WINNER_JS, url, x.ravel().tolist(), stale)
    assert "error" not in runs, runs
    first, again = runs
    assert all(c["how"] == "timed" for c in first["variants"].values())
    assert len(again["variants"]) == len(tunable)
    for choice, tune in zip(again["variants"].values(), tunable, strict=True):
        assert choice["how"] == "timed" and choice["variant"] in [v["variant"] for v in tune["variants"][:2]]
    assert stale not in again["cached"] and len(again["cached"]) == len(first["cached"])
    with torch.no_grad():
        expected = model(torch.from_numpy(x))
    torch.testing.assert_close(torch.tensor(again["y"]).reshape(4, 8), expected, atol=ATOL, rtol=RTOL)


SPLIT_JS = """
const [url, x, tuneKey, split] = arguments;
const done = arguments[arguments.length - 1];
import("/torch-webgpu.js").then(async (T) => {
  const autotuneCache = {get: (key) => (key.startsWith(`${tuneKey}|`) ? split.variant : null), set() {}};
  const model = await T.load(url, {autotune: true, autotuneMinFlops: 0, autotuneCache});
  const [y] = await model.run([new Float32Array(x)]);
  const ms = await model._timeVariant(split);   // timing a candidate runs its dispatches too
  done({variants: model.variants, y: Array.from(y.data), ms});
  model.release();
}).catch((e) => done({error: `${e.name}: ${e.message}`}));
"""


def test_split_k_variant_runs_its_combine_in_the_page(page, web_root):
    # A split-K matmul variant is two dispatches (the second under "then"): the page runs (and times)
    # both when it is the winner, and matches torch.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(520, 72), torch.nn.GELU()).eval()
    x = torch.randn(37, 520)
    path = torch_webgpu.export(model, [x], web_root / "splitk.bundle", target="webgpu-core")
    main = json.loads((path / "manifest.json").read_text())["plan"]["main"]
    (tune,) = [n["tune"] for n in main if "tune" in n]
    split = next(v for v in tune["variants"] if "then" in v)
    url = page.current_url.replace("blank.html", f"{path.name}/")
    run = page.execute_async_script(SPLIT_JS, url, x.ravel().tolist(), tune["key"], split)
    assert "error" not in run, run
    assert list(run["variants"].values()) == [{"variant": split["variant"], "how": "cached"}]
    assert 0 < run["ms"] < float("inf")
    with torch.no_grad():
        expected = model(x)
    got = torch.tensor(run["y"], dtype=torch.float32).reshape(37, 72)
    torch.testing.assert_close(got, expected, atol=ATOL, rtol=RTOL)


def test_a_shader_the_device_rejects_is_named_with_its_line(mlp_web, run_in_page, web_root):
    path, _, x = mlp_web
    broken = shutil.copytree(path, web_root / "bad-wgsl.bundle")
    plan = json.loads((broken / "manifest.json").read_text())["plan"]
    dispatched = next(n["entry_point"] for n in plan["main"] if n["op"] == "dispatch")
    wgsl = broken / plan["executables"][dispatched]["wgsl_file"]
    lines = wgsl.read_text().splitlines()
    wgsl.write_text("\n".join([*lines[:5], "this is not WGSL;", *lines[5:]]) + "\n")

    edit_manifest(broken, lambda m: m["files"].update({wgsl.name: sha256(wgsl.read_bytes())}))
    name, message = _error(run_in_page(broken, [x]))
    assert name == "BundleError" and f"({wgsl.name}) does not build on this device" in message, message
    assert f"{wgsl.name}:6:" in message, message
