"""The benchmark harness's smoke mode runs end to end and writes its reports."""

import json
import subprocess
import sys


def test_smoke_run_writes_json_markdown_and_plot(tmp_path):
    out = tmp_path / "bench"
    proc = subprocess.run(
        # IREE's Vulkan runtime compiles every figure again: test_iree_vulkan.py covers it, faster.
        [sys.executable, "-m", "benchmarks", "run", "--suite", "all", "--smoke", "--out", str(out),
         "--backends", "dawn,wgpu,webgpu-compiled,webgpu-eager,torch-cpu"],
        capture_output=True, text=True, timeout=1200)   # cold caches on 2 loaded cores
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((out / "results.json").read_text())
    results = doc["results"]
    names = {(r["name"], r["backend"]) for r in results}
    assert ("tiny dispatch (batched, 1 submit)", "dawn") in names
    assert ("eager op: add", "webgpu-eager") in names
    assert ("matmul f32 64^3", "webgpu-compiled") in names
    assert ("matmul f32 64^3 (library)", "webgpu-library") in names  # kernels.matmul, checked then timed
    assert ("MLP latency", "webgpu-compiled") in names
    assert any(name.startswith("GPT-2 tiny decode") for name, _ in names)
    # Compiled figures carry a per-dispatch profile of one call.
    assert any(p["name"] == "MLP" and p["dispatches"] > 0 and p["top"] for p in doc["profiles"])
    assert all(r["median"] > 0 for r in results)
    # Figures that could not be measured are listed with their reason, never dropped silently.
    for failure in doc["failures"]:
        assert failure["error"] and failure["backend"]
        assert failure["name"] in (out / "results.md").read_text()
    report = (out / "results.md").read_text()
    assert "| micro |" in report
    # The report opens with the issue-12 targets and splits compiled GPU time into library and IREE.
    assert report.lstrip().startswith("Issue 12 targets") and "targets met." in report
    assert "Kernel library vs IREE" in report and "Autotuner" in report
    mlp = next(p for p in doc["profiles"] if p["name"] == "MLP")
    assert sum(n for n, _ in mlp["by_kind"].values()) == mlp["dispatches"]
    assert (out / "results.png").stat().st_size > 0
    # No CUDA backend asked for: one process, the WebGPU one, which never touched CUDA; the GPU's clock
    # beside it is in the JSON and the report (here: why it was not sampled).
    [process] = doc["meta"]["processes"]
    assert process["part"] == "webgpu" and process["cuda_context"] is False
    assert process["libcuda_loaded"] is False and process["torch_cuda_initialized"] is False
    assert process["gpu_clock"]["returncode"] == 0 and "The GPU's clock per process" in report


def test_only_measures_just_the_matching_figures(tmp_path):
    out = tmp_path / "bench"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "run", "--suite", "bandwidth", "--smoke", "--out", str(out),
         "--backends", "torch-cpu", "--only", "^add "],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    names = {r["name"] for r in json.loads((out / "results.json").read_text())["results"]}
    assert names and all(name.startswith("add ") for name in names)
