"""`torch-webgpu compile / run / inspect`: round trips in subprocesses against torch on CPU; option and
error checks through `main()` in this process (a subprocess costs a torch import)."""

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from . import cli_models
from .conftest import MODELS, REPO


def _reference(factory: str, x: torch.Tensor) -> np.ndarray:
    with torch.no_grad():
        return getattr(cli_models, factory)().eval()(x).numpy()


def _round_trip(cli, tmp_path, factory, shape, target="webgpu-core", bundle_name="model.bundle"):
    """compile, inspect, run with .npy in and out; the output matches torch CPU (atol 1e-4)."""
    bundle = tmp_path / bundle_name
    type_ = "x".join(map(str, shape)) + "xf32"
    cli("compile", f"{MODELS}:{factory}", "--input", type_, "--target", target, "-o", bundle)
    info = json.loads(cli("inspect", bundle, "--json", "--check").stdout)
    assert info["inputs"] == [{"name": "x", "shape": list(shape), "dtype": "float32"}]
    assert info["dispatches"] > 0 and info["wgsl_total_bytes"] > 0 and info["weights"]["bytes"] > 0
    assert info["target"]["name"] == target and info["unmet"] == []
    torch.manual_seed(1)
    x = torch.randn(*shape)
    np.save(tmp_path / "x.npy", x.numpy())
    out = cli("run", bundle, "--input", f"@{tmp_path / 'x.npy'}", "--output", f"@{tmp_path / 'y.npy'}")
    assert "result[0]: wrote" in out.stdout
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), _reference(factory, x), atol=1e-4, rtol=1e-4)
    return info


def test_mlp_round_trip_webgpu_core(cli, mlp_cli_bundle, tmp_path):
    info = json.loads(cli("inspect", mlp_cli_bundle, "--json", "--check").stdout)
    assert info["target"]["name"] == "webgpu-core" and info["unmet"] == []
    assert info["requires"]["limits"]["max-compute-invocations-per-workgroup"] <= 256
    x = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    cli("run", mlp_cli_bundle, "--input", f"@{tmp_path / 'x.npy'}", "--output", f"@{tmp_path / 'y.npy'}")
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), _reference("mlp", torch.from_numpy(x)),
                               atol=1e-4, rtol=1e-4)


@pytest.mark.slow
def test_mlp_round_trip_auto_zip(cli, tmp_path):
    info = _round_trip(cli, tmp_path, "mlp", (4, 16), target="auto", bundle_name="mlp.zip")
    assert Path(info["path"]).is_file()


@pytest.mark.slow
def test_conv_block_round_trip(cli, tmp_path):
    _round_trip(cli, tmp_path, "conv_block", (2, 3, 8, 8))


@pytest.mark.slow
def test_transformer_block_round_trip(cli, tmp_path):
    _round_trip(cli, tmp_path, "transformer_block", (2, 8, 32))


@pytest.mark.slow
def test_compile_exported_program(cli, tmp_path):
    model = cli_models.mlp().eval()
    x = torch.randn(4, 16)
    torch.export.save(torch.export.export(model, (x,)), tmp_path / "mlp.pt2")
    cli("compile", tmp_path / "mlp.pt2", "-o", tmp_path / "b", "-q", "--target", "webgpu-core")
    np.save(tmp_path / "x.npy", x.numpy())
    cli("run", tmp_path / "b", "--input", f"@{tmp_path / 'x.npy'}", "--output", f"@{tmp_path / 'y.npy'}")
    with torch.no_grad():
        np.testing.assert_allclose(np.load(tmp_path / "y.npy"), model(x).numpy(), atol=1e-4, rtol=1e-4)


def test_inline_values_print_and_benchmark(main_cli, mlp_cli_bundle):
    code, out, _ = main_cli("run", mlp_cli_bundle, "--input", "4x16xf32=0.5", "--benchmark", "3")
    assert code == 0
    expected = _reference("mlp", torch.full((4, 16), 0.5))
    assert out.startswith("result[0]: 4x8xf32=[[")
    first = float(out.split("[[")[1].split()[0])
    assert abs(first - expected[0, 0]) < 1e-4
    assert "benchmark: 3 calls, median" in out and "min" in out and "max" in out


def test_inspect_text(main_cli, mlp_cli_bundle):
    code, out, _ = main_cli("inspect", mlp_cli_bundle)
    assert code == 0
    for needle in ("signature: (x: float32[4, 16]) -> (float32[4, 8])", "input  x: 4x16xf32",
                   "output output0: 4x8xf32", "dispatches per call: 2", "WGSL:",
                   "weights: 3232 bytes in 4 tensors", "requires features: none",
                   "max-storage-buffers-per-shader-stage"):
        assert needle in out, (needle, out)


def test_help_documents_every_option(main_cli):
    assert all(c in main_cli("--help")[1] for c in ("compile", "run", "inspect"))
    code, compile_help, _ = main_cli("compile", "--help")
    assert code == 0
    for option in ("--input", "--target", "webgpu-core", "--f16", "--dump-dir", "--compile-to", "high-ir",
                   "iree-input", "wgsl", "FILE.py:FACTORY", ".pt2"):
        assert option in compile_help, option
    run_help = main_cli("run", "--help")[1]
    for option in ("--input", "@x.npy", "--output", "--benchmark"):
        assert option in run_help, option


@pytest.mark.slow
def test_console_script_is_installed():
    script = REPO / ".venv" / "bin" / "torch-webgpu"
    if not script.exists():
        pytest.skip("no editable install in .venv")
    proc = subprocess.run([str(script), "inspect", "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "--check" in proc.stdout


def test_compile_to_high_ir_and_iree_input(main_cli, tmp_path):
    code, high, _ = main_cli("compile", f"{MODELS}:mlp", "--input", "4x16xf32", "--compile-to=high-ir", "-q")
    assert code == 0 and "mm" in high
    code, _, _ = main_cli("compile", f"{MODELS}:mlp", "--input", "4x16xf32", "--compile-to=iree-input", "-q",
                          "--target", "webgpu-core", "-o", tmp_path / "in.mlir")
    text = (tmp_path / "in.mlir").read_text()
    assert code == 0 and "hal.device.targets" in text and "max_thread_count_per_workgroup = 256" in text


def test_compile_to_wgsl_and_dump_dir(main_cli, tmp_path):
    code, _, err = main_cli("compile", f"{MODELS}:mlp", "--input", "4x16xf32", "--compile-to=wgsl",
                            "-o", tmp_path / "wgsl", "--dump-dir", tmp_path / "dump", "-q")
    assert code == 0, err
    shaders = sorted((tmp_path / "wgsl").glob("*.wgsl"))
    # two library matmuls, each with every variant the plan carries for load-time tuning
    assert len(shaders) >= 2 and all("@compute" in p.read_text() for p in shaders)
    assert {p.name for p in shaders} <= {p.name for p in (tmp_path / "dump").rglob("*.wgsl")}


@pytest.mark.parametrize("args, message", [
    (["--input", "2x16xf32"], "input 0 (x) is float32[2, 16], expected float32[4, 16]"),
    (["--input", "4x16xi32"], "input 0 (x) is int32[4, 16], expected float32[4, 16]"),
    (["--input", "4x16xf64"], "float64 has no WebGPU type"),
    (["--input", "4x16xf32=1,2,3"], "3 values for a 4x16xf32 tensor"),
    (["--input", "4x16xf32", "--input", "4x16xf32"], "takes 1 inputs, got 2"),
])
def test_run_bad_input(main_cli, mlp_cli_bundle, args, message):
    code, _, err = main_cli("run", mlp_cli_bundle, *args)
    assert code == 2 and message in err, err
    if "expected" in message:
        assert "(x: float32[4, 16]) -> (float32[4, 8])" in err


def test_run_tampered_bundle(main_cli, mlp_cli_bundle, tmp_path):
    copy = Path(shutil.copytree(mlp_cli_bundle, tmp_path / "tampered"))
    wgsl = next(copy.glob("*.wgsl"))
    wgsl.write_text(wgsl.read_text() + "// edited\n")
    code, _, err = main_cli("run", copy, "--input", "4x16xf32")
    assert code == 2 and "hash mismatch" in err and wgsl.name in err


@pytest.mark.parametrize("args, message", [
    (["--f16", "--target", "webgpu-core", "-o", "unused"], "'shader-f16', which target webgpu-core does not"),
    ([], "-o PATH"),
])
def test_compile_refusals(main_cli, args, message):
    code, _, err = main_cli("compile", f"{MODELS}:mlp", "--input", "4x16xf32", "-q", *args)
    assert code == 2 and message in err, err


def test_compile_factory_must_return_module(main_cli, tmp_path):
    code, _, err = main_cli("compile", f"{MODELS}:not_a_module", "--input", "4xf32", "-o", tmp_path / "b",
                            "-q")
    assert code == 2 and "returned int, not an nn.Module" in err


def test_compile_unsupported_op_is_named(main_cli, tmp_path):
    code, _, err = main_cli("compile", f"{MODELS}:unsupported_op", "--input", "8xf32", "-o", tmp_path / "b",
                            "-q")
    assert code == 2 and "aten.erfinv" in err, err


@pytest.mark.slow
def test_decoder_compile_inspect_generate(cli, tmp_path):
    """compile --decoder --tokenizer writes a decode bundle with the tokenizer, inspect lists its phases,
    generate prints greedy ids (--ids) and streams text (--prompt, --chat) as transformers gives them."""
    from tests.language_models import build_language_model, reference_generate, reference_text

    lm = build_language_model("qwen2")
    lm.tokenizer.save_pretrained(tmp_path / "tokenizer")
    bundle = tmp_path / "qwen2.bundle"
    cli("compile", f"{MODELS}:text_qwen2", "--decoder", "--max-len", "24", "--prompt-buckets", "12",
        "--target", "webgpu-core", "--tokenizer", tmp_path / "tokenizer", "-o", bundle)
    info = json.loads(cli("inspect", bundle, "--json").stdout)
    assert info["decoder"]["max_len"] == 24 and sorted(info["decoder"]["phases"]) == ["decode", "prefill-12"]
    assert json.loads((bundle / "manifest.json").read_text())["decoder"]["tokenizer"] == {
        "json": "tokenizer.json", "config": "tokenizer_config.json"}
    prompt = [5, 17, 99]
    want = reference_generate(lm, prompt, 6)
    out = cli("generate", bundle, "--ids", ",".join(map(str, prompt)), "--max-new-tokens", "6")
    assert out.stdout.strip().splitlines()[-1] == ",".join(map(str, want))
    sampled = cli("generate", bundle, "--ids", "5,17,99", "--max-new-tokens", "4", "--sample", "--top-k", "5")
    assert sampled.stdout.strip().splitlines()[-1].startswith("5,17,99,")
    text = cli("generate", bundle, "--prompt", "Grüße 你好", "--max-new-tokens", "6").stdout
    assert text == reference_text(lm, "Grüße 你好", 6) + "\n"
    chat = [{"role": "user", "content": "Hello"}]
    ids = list(lm.tokenizer.apply_chat_template(chat, add_generation_prompt=True, return_dict=False))
    reply = cli("generate", bundle, "--chat", "--prompt", "Hello", "--max-new-tokens", "5").stdout
    want = lm.tokenizer.decode(reference_generate(lm, ids, 5)[len(ids):], skip_special_tokens=True)
    assert reply == want + "\n"
    refused = cli("compile", f"{MODELS}:mlp", "--input", "4x16xf32", "--tokenizer", tmp_path / "tokenizer",
                  "-o", tmp_path / "mlp", check=False)
    assert refused.returncode == 2 and "--tokenizer goes with --decoder" in refused.stderr
